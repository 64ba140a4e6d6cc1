"""`mediator import acapy|credo`: another mediator's state carried into ours, so that its
wallets and their peers carry on unchanged (docs/import-sources.md says what each source
keeps, and where).

    source    the Askar store, opened read-only (a copy of a SQLite file), with the errors
              an operator can act on
"""
