# bash .ci/gpu/wait.sh NAME SECONDS [FILES...]: wait for a detached job (or SECONDS), copying its log and FILES to $OUT
# as it goes (a call cut off at its limit still brings back what had finished).
name=$1; secs=$2; shift 2
end=$((SECONDS+secs))
while [ ! -f /tmp/$name.rc ] && [ $SECONDS -lt $end ]; do
  sleep 5; cp /tmp/$name.log $OUT/ 2>/dev/null; for f in "$@"; do cp $f $OUT/ 2>/dev/null; done
done
cp /tmp/$name.log $OUT/ 2>/dev/null
for f in "$@"; do cp $f $OUT/ 2>/dev/null; done
if [ -f /tmp/$name.rc ]; then echo "DONE $name rc=$(cat /tmp/$name.rc)"; else echo "RUNNING $name"; fi
cat /tmp/lessons.txt 2>/dev/null
tail -c 2500 /tmp/$name.log
