#!/usr/bin/env bash
# Cross-check matrix: recipient made by lib R, packed by lib P (anon/auth, optional ENC), unpacked by R.
set -u
cd "$(dirname "$0")"
W=work; mkdir -p $W
[ -f $W/plain.json ] || echo '{"id":"1b2f5b1c-3a6e-4d55-9d0c-0a1b2c3d4e5f","type":"https://didcomm.org/basicmessage/2.0/message","created_time":1700000000,"body":{"content":"hello from the cross-check"}}' > $W/plain.json
for r in veramo identus; do node mkpeer.mjs $r > $W/r-$r.json 2>/dev/null || { echo "mkpeer $r failed"; exit 1; }; done
pass=0; fail=0
run() { # recipientLib packLib mode enc
  local r=$1 p=$2 m=$3 enc=${4:-}; local tag="recipient=$r pack=$p mode=$m enc=${enc:-default}"
  local did; did=$(jq -r .did $W/r-$r.json)
  local jwe=$W/jwe-$r-$p-$m-${enc:-def}.json
  if ! ENC=$enc node pack.mjs $p $m "$did" $W/plain.json > $jwe 2>$W/err; then echo "FAIL pack   $tag: $(grep -m1 -o 'pack failed.*' $W/err | cut -c1-160)"; fail=$((fail+1)); return; fi
  local hdr; hdr=$(jq -r .protected $jwe | tr '_-' '/+' | base64 -d 2>/dev/null | jq -c '{alg,enc,skid:(.skid!=null),apu:(.apu!=null),apv:(.apv!=null)}' 2>/dev/null)
  if node unpack.mjs $r $W/r-$r.json $jwe > $W/out 2>$W/err && [ "$(jq -c .body $W/out)" = "$(jq -c .body $W/plain.json)" ]; then
    echo "OK          $tag $hdr"; pass=$((pass+1))
  else echo "FAIL unpack $tag $hdr: $(grep -m1 -o 'unpack failed.*' $W/err | cut -c1-200)"; fail=$((fail+1)); fi
}
for r in veramo identus; do for p in veramo identus; do for m in anon auth; do run $r $p $m; done; done; done
# non-default content encryption
for r in veramo identus; do for enc in A256CBC-HS512 A256GCM XC20P; do run $r veramo anon $enc; run $r veramo auth $enc; run $r identus anon $enc; done; done
echo "$pass passed, $fail failed"
