#!/usr/bin/env bash
# Writes samples/: one fixed recipient (made with Identus: raw private keys are directly on the key objects),
# and for each library x {anon,auth} a packed JWE, the sender secrets (auth), and the decrypted plaintext.
set -euo pipefail
cd "$(dirname "$0")"
S=samples; mkdir -p $S
if [ ! -f $S/recipient-secrets.json ]; then
  node mkpeer.mjs identus https://mediator.example.org/didcomm > $S/recipient-secrets.json 2>/dev/null
fi
cat > $S/plaintext.json <<'P'
{"id":"6f1e9c2a-5b1d-4c3e-8f00-0d1c2b3a4f5e","type":"https://didcomm.org/basicmessage/2.0/message","created_time":1700000000,"lang":"en","body":{"content":"Hello mediator: DIDComm v2 cross-check"}}
P
TO=$(jq -r .did $S/recipient-secrets.json)
gen() { # lib mode [enc]
  local lib=$1 mode=$2 enc=${3:-}; local n=$lib-$mode${enc:+-$enc}
  if [ $mode = auth ]; then
    [ -f $S/sender-$lib.json ] || node mkpeer.mjs $lib https://sender.example.org/didcomm > $S/sender-$lib.json 2>/dev/null
    SENDER_SECRETS=$S/sender-$lib.json ENC=$enc node pack.mjs $lib $mode "$TO" $S/plaintext.json > $S/$n.jwe.json 2>/dev/null
  else
    ENC=$enc node pack.mjs $lib $mode "$TO" $S/plaintext.json > $S/$n.jwe.json 2>/dev/null
  fi
  jq -r .protected $S/$n.jwe.json | tr '_-' '/+' | base64 -d 2>/dev/null | jq . > $S/$n.protected-header.json || true
  node unpack.mjs $lib $S/recipient-secrets.json $S/$n.jwe.json > $S/$n.plaintext.json 2>/dev/null
  echo "wrote $S/$n.jwe.json ($(jq -c '{alg,enc,skid:(.skid!=null),apu:(.apu!=null),apv:(.apv!=null)}' $S/$n.protected-header.json))"
}
gen veramo anon; gen veramo auth; gen identus anon; gen identus auth
# extras with non-default content encryption
gen veramo anon A256CBC-HS512; gen veramo auth A256CBC-HS512; gen identus anon A256CBC-HS512; gen identus anon A256GCM
