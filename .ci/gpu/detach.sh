# bash .ci/gpu/detach.sh NAME CMD...: run CMD in its own session (outlives this call), log in /tmp/NAME.log, /tmp/NAME.rc at the end.
name=$1; shift
rm -f /tmp/$name.rc
setsid nohup bash -c "$* > /tmp/$name.log 2>&1; echo \$? > /tmp/$name.rc" >/dev/null 2>&1 < /dev/null &
echo "started $name"
