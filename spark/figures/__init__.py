"""The report's figures (SUMMARY.md), computed in Spark from the history; the page only
draws them. One module per part: memory (servers, forecast, skew), mailboxes (sizes, ages,
staleness, in flight, dead letters, live sockets), flow (throughput, change points),
coverage; verdict.py weighs them."""
