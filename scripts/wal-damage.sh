#!/bin/bash
# Reproduces the lost history in an older WAL (RELIABILITY.md, section 'Lost history in an older
# WAL'): SIGKILL a strata-stress run while >=2 WALs exist, cut ~50 KB off the older one, reopen
# (the next run verifies first).
bin=${1:-./target/release/strata-stress}
tries=0; found=0; corrupt=0; other=0
for seed in $(seq 1 60); do
  d=/tmp/waldmg/db; rm -rf /tmp/waldmg; mkdir -p /tmp/waldmg
  $bin run --dir $d --seed $seed --seconds 30 >/dev/null 2>&1 &
  pid=$!
  got=0
  for i in $(seq 1 400); do
    sleep 0.01
    n=$(ls $d 2>/dev/null | grep -c '\.log$')
    if [ "$n" -ge 2 ]; then
      old=$(ls $d | grep '\.log$' | sort | head -1)
      sz=$(stat -c %s $d/$old 2>/dev/null || echo 0)
      if [ "$sz" -gt 8000 ]; then kill -9 $pid; got=1; break; fi
    fi
  done
  [ $got = 0 ] && { kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null; continue; }
  wait $pid 2>/dev/null
  n=$(ls $d | grep -c '\.log$'); [ "$n" -ge 2 ] || continue
  old=$(ls $d | grep '\.log$' | sort | head -1); sz=$(stat -c %s $d/$old)
  cut=$(( sz/2 < 50000 ? sz/2 : 50000 )); truncate -s $((sz - cut)) $d/$old
  found=$((found+1))
  out=$($bin run --dir $d --seed $((seed+1000)) --seconds 0.2 2>&1)
  if echo "$out" | grep -q -i 'corrupt'; then corrupt=$((corrupt+1)); echo "seed $seed: $(echo "$out" | grep -i -m1 corrupt | cut -c1-200)";
  else other=$((other+1)); echo "seed $seed: OTHER: $(echo "$out" | tail -2 | cut -c1-300)"; fi
  [ $found -ge 10 ] && break
done
echo "cases $found corruption $corrupt other $other"
