#!/usr/bin/env bash
# Runs deploy/clothcast.service under a real systemd, in a container: debootstraps a
# minimal Debian (once, into $ROOT), installs the release binary, the unit as shipped,
# a config serving the small test database and token files for its credentials, boots
# it with systemd-nspawn and checks that systemd starts the server (Type=notify: READY)
# with the tokens it loaded as credentials (a wrong one refused, the files unreadable
# by the service user), that it streams three walking
# avatars to a viewer inside its sandbox (the system-call filter included), that
# `systemctl reload` reads the tokens again in the same process, that a
# stalled tick loop (only the tick thread frozen, by ptrace from outside) stops the
# watchdog pings and gets the server killed and restarted, and that it stops cleanly.
# With --bake it checks a first start instead: no database named, so the server bakes
# the default one (~8 min on 2 cores) under a start timeout of 60 s, which only the
# progress it reports (EXTEND_TIMEOUT_USEC per example) lets it outlast. With --socket
# it checks socket activation: deploy/clothcast.socket moved to port 80, the server
# (without capabilities) serving on it, then stopped and started again by a viewer's
# connection.
# Needs root, debootstrap and systemd-container (apt-get install debootstrap
# systemd-container), python3 and Debian's mirror; not part of the test suite.
#   scripts/systemd_check.sh [--bake | --socket] [ROOT]    (default /tmp/clothcast-nspawn)
set -euo pipefail
cd "$(dirname "$0")/.."
BAKE=0
SOCKET=0
if [ "${1:-}" = "--bake" ]; then BAKE=1; shift; fi
if [ "${1:-}" = "--socket" ]; then SOCKET=1; shift; fi
ROOT=${1:-/tmp/clothcast-nspawn}
OUT=$(mktemp -d)
fail() { echo "FAILED: $*"; exit 1; }
# boot TIMEOUT UNIT: installs the written clothcast-probe script as a oneshot unit
# (UNIT: its text), boots the container once (the probe powers it off), uninstalls it
boot() {
  chmod 0755 "$ROOT/usr/local/bin/clothcast-probe"
  printf '%b' "$2" > "$ROOT/etc/systemd/system/clothcast-probe.service"
  ln -sf /etc/systemd/system/clothcast-probe.service "$ROOT/etc/systemd/system/multi-user.target.wants/"
  timeout "$1" systemd-nspawn -q -b -D "$ROOT" --register=no --keep-unit --bind="$OUT":/probe --console=pipe >"$OUT/nspawn.log" 2>&1 || true
  rm -f "$ROOT/etc/systemd/system/multi-user.target.wants/clothcast-probe.service"
}
# report FILE...: what the probe wrote
report() {
  for f in "$@"; do
    echo "== $f"; cat "$OUT/$f" 2>/dev/null || echo "(missing)"
  done
}
AFTER_SERVER='[Unit]\nAfter=clothcast.service\n[Service]\nType=oneshot\nExecStart=/usr/local/bin/clothcast-probe\n[Install]\nWantedBy=multi-user.target\n'
cargo build --release --bin clothcast
if [ ! -x "$ROOT/lib/systemd/systemd" ]; then
  debootstrap --variant=minbase --include=systemd,systemd-sysv,dbus bookworm "$ROOT" http://deb.debian.org/debian
fi
chroot "$ROOT" id clothcast >/dev/null 2>&1 || chroot "$ROOT" useradd --system --no-create-home --shell /usr/sbin/nologin clothcast
install -m 0755 target/release/clothcast "$ROOT/usr/local/bin/clothcast"
install -d -m 0750 "$ROOT/etc/clothcast"
rm -f "$ROOT"/etc/clothcast/*
printf 'bind = "127.0.0.1:8470"\nvmc_bind = "off"\nmvn_bind = "off"\ndatabases = ["small.ccdb"]\n' > "$ROOT/etc/clothcast/server.toml"
cp tests/fixtures/db/v1/small.ccdb "$ROOT/etc/clothcast/"
chmod 0640 "$ROOT"/etc/clothcast/*
chroot "$ROOT" chgrp -R clothcast /etc/clothcast
# the tokens as the unit's header says to make them: root's alone, loaded as credentials
(umask 077; head -c 24 /dev/urandom | base64 > "$ROOT/etc/clothcast/publisher.token")
(umask 077; head -c 24 /dev/urandom | base64 > "$ROOT/etc/clothcast/viewer.token")
cp tests/fixtures/mocap/cmu_131_01.bvh "$ROOT/clip.bvh"
install -m 0644 deploy/clothcast.service "$ROOT/etc/systemd/system/"
mkdir -p "$ROOT/etc/systemd/system/multi-user.target.wants"
ln -sf /etc/systemd/system/clothcast.service "$ROOT/etc/systemd/system/multi-user.target.wants/"
rm -rf "$ROOT/etc/systemd/system/clothcast.service.d" "$ROOT/etc/systemd/system/clothcast.socket.d" "$ROOT/var/cache/clothcast"
rm -f "$ROOT/etc/systemd/system/clothcast.socket" "$ROOT/etc/systemd/system/sockets.target.wants/clothcast.socket"
if [ "$SOCKET" = 1 ]; then
  # the socket unit as shipped, moved by a drop-in to port 80, which the server (no
  # capabilities) could not bind itself; the config's bind is a port nobody uses
  install -m 0644 deploy/clothcast.socket "$ROOT/etc/systemd/system/"
  mkdir -p "$ROOT/etc/systemd/system/sockets.target.wants" "$ROOT/etc/systemd/system/clothcast.socket.d"
  ln -sf /etc/systemd/system/clothcast.socket "$ROOT/etc/systemd/system/sockets.target.wants/"
  printf '[Socket]\nListenStream=\nListenStream=127.0.0.1:80\n' > "$ROOT/etc/systemd/system/clothcast.socket.d/port80.conf"
  sed -i 's/^bind = .*/bind = "127.0.0.1:1"/' "$ROOT/etc/clothcast/server.toml"
  cat > "$ROOT/usr/local/bin/clothcast-probe" <<'PROBE'
#!/bin/bash
show() { systemctl show "$1" -p ActiveState -p SubState -p MainPID -p NRestarts | tr '\n' ' '; echo; }
export CLOTHCAST_PUBLISHER_TOKEN=$(cat /etc/clothcast/publisher.token)
export CLOTHCAST_VIEWER_TOKEN=$(cat /etc/clothcast/viewer.token)
sleep 2
{ echo "at boot:"; show clothcast.socket; show clothcast.service; } > /probe/states.txt
timeout 8 clothcast play /clip.bvh --url ws://127.0.0.1:80/ws --avatars 2 --seconds 4 >/dev/null 2>&1 &
sleep 1
timeout 20 clothcast watch --url ws://127.0.0.1:80/ws --seconds 2 > /probe/watch.txt 2>&1
wait
# stopped, the server is started again by the next connection, which waits for it
systemctl stop clothcast.service
{ echo "stopped:"; show clothcast.socket; show clothcast.service; } >> /probe/states.txt
timeout 20 clothcast watch --url ws://127.0.0.1:80/ws --seconds 2 --no-reconnect > /probe/woken.txt 2>&1
echo "exit $?" >> /probe/woken.txt
{ echo "after a connection:"; show clothcast.socket; show clothcast.service; } >> /probe/states.txt
journalctl -u clothcast.service -u clothcast.socket -b --no-pager -o short-monotonic | grep -v 'clothcast::net::conn' > /probe/journal.txt
systemctl stop clothcast.socket clothcast.service
systemctl poweroff
PROBE
  boot 180 "$AFTER_SERVER"
  rm -f "$ROOT/etc/systemd/system/sockets.target.wants/clothcast.socket"
  report states.txt watch.txt woken.txt journal.txt
  grep -q 'listening on the socket systemd passed' "$OUT/journal.txt" || fail "the server did not take the passed socket"
  grep -q 'serving on ws://127.0.0.1:80/ws' "$OUT/journal.txt" || fail "not serving on port 80"
  grep -q 'missed 0' "$OUT/watch.txt" || fail "the viewer saw no frames"
  grep -q 'exit 0' "$OUT/woken.txt" || fail "a connection did not start the stopped server"
  [ "$(grep -c 'Started clothcast.service' "$OUT/journal.txt")" = 2 ] || fail "not started twice"
  echo "systemd socket activation check passed"
  exit 0
fi
if [ "$BAKE" = 1 ]; then
  # no databases: the first start bakes the default one, with a start timeout far
  # shorter than the bake
  printf 'bind = "127.0.0.1:8470"\nvmc_bind = "off"\nmvn_bind = "off"\n' > "$ROOT/etc/clothcast/server.toml"
  mkdir -p "$ROOT/etc/systemd/system/clothcast.service.d"
  printf '[Service]\nTimeoutStartSec=60s\n' > "$ROOT/etc/systemd/system/clothcast.service.d/short-start.conf"
  cat > "$ROOT/usr/local/bin/clothcast-probe" <<'PROBE'
#!/bin/bash
for i in $(seq 1 150); do
  line=$(systemctl show clothcast -p ActiveState -p SubState -p StatusText -p NRestarts | tr '\n' ' ')
  echo "t=$((i * 10)) s: $line" >> /probe/during.txt
  case "$line" in *ActiveState=active*SubState=running*) break;; esac
  sleep 10
done
systemctl show clothcast -p ActiveState -p SubState -p StatusText -p NRestarts -p Result > /probe/after.txt
ls -l /var/cache/clothcast >> /probe/after.txt
journalctl -u clothcast -b --no-pager -o short-monotonic | grep -v 'clothcast::net::conn' > /probe/journal.txt
systemctl stop clothcast
systemctl poweroff
PROBE
  # not ordered after the server: it would wait for READY, after the bake
  boot 1800 '[Service]\nType=oneshot\nExecStart=/usr/local/bin/clothcast-probe\nTimeoutStartSec=30min\n[Install]\nWantedBy=multi-user.target\n'
  report during.txt after.txt journal.txt
  grep -q 'StatusText=baking the default database: [0-9]*/48 examples' "$OUT/during.txt" || fail "no bake progress in the status line"
  grep -q 'ActiveState=active' "$OUT/after.txt" && grep -q 'NRestarts=0' "$OUT/after.txt" || fail "not started on the first try"
  grep -q 'default-tshirt-.*\.ccdb' "$OUT/after.txt" || fail "no cached database"
  grep -qi 'timed out' "$OUT/journal.txt" && fail "the start timed out"
  echo "systemd bake check passed"
  exit 0
fi
# inside: start, stream, then sample the unit once a second while the host freezes the
# tick thread, then stop and power off
cat > "$ROOT/usr/local/bin/clothcast-probe" <<'PROBE'
#!/bin/bash
show() { systemctl show clothcast -p ActiveState -p StatusText -p MainPID -p NRestarts -p Result; }
sleep 2
# the clients take the tokens from the environment, as the server took them from
# its credentials; the service user cannot read the token files themselves
export CLOTHCAST_PUBLISHER_TOKEN=$(cat /etc/clothcast/publisher.token)
export CLOTHCAST_VIEWER_TOKEN=$(cat /etc/clothcast/viewer.token)
{ timeout 5 clothcast watch --url ws://127.0.0.1:8470/ws --token wrong --seconds 1 --no-reconnect; echo "exit $?"; } > /probe/refused.txt 2>&1
{ setpriv --reuid=clothcast --regid=clothcast --clear-groups cat /etc/clothcast/publisher.token; echo "exit $?"; } > /probe/unreadable.txt 2>&1
timeout 8 clothcast play /clip.bvh --url ws://127.0.0.1:8470/ws --avatars 3 >/dev/null 2>&1 &
sleep 1
timeout 20 clothcast watch --url ws://127.0.0.1:8470/ws --seconds 4 > /probe/watch.txt 2>&1 &
sleep 2.5
show > /probe/streaming.txt
wait
# a reload (`systemctl reload`: the unit's ExecReload= sends SIGHUP): the server reads
# its tokens again and stays up, the same process; the credential rotated first shows
# whether this systemd refreshes credentials on reload (it is put back afterwards)
cp -p /etc/clothcast/publisher.token /root/publisher.token.kept
echo rotated-publisher-token > /etc/clothcast/publisher.token
systemctl show clothcast -p MainPID > /probe/reload.txt
{ systemctl reload clothcast; echo "reload exit $?"; } >> /probe/reload.txt 2>&1
show >> /probe/reload.txt
{ timeout 5 clothcast play /clip.bvh --url ws://127.0.0.1:8470/ws --token rotated-publisher-token --seconds 1; echo "rotated token: exit $?"; } > /probe/rotated.txt 2>&1
cp -p /root/publisher.token.kept /etc/clothcast/publisher.token
systemctl reload clothcast
touch /probe/freeze
for i in $(seq 1 22); do
  sleep 1
  echo "t=$i s: $(systemctl show clothcast -p MainPID -p NRestarts -p StatusText | tr '\n' ' ')" >> /probe/during.txt
done
show > /probe/after.txt
systemctl stop clothcast
show > /probe/stopped.txt
journalctl -u clothcast -b --no-pager -o short-monotonic | grep -v 'clothcast::net::conn' > /probe/journal.txt
systemctl poweroff
PROBE
# outside: when told, freeze the server's tick thread only (PTRACE_SEIZE + INTERRUPT)
python3 - "$OUT" <<'FREEZE' &
import ctypes, os, sys, time
out = sys.argv[1]
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
deadline = time.time() + 120
while not os.path.exists(f"{out}/freeze"):
    if time.time() > deadline: sys.exit("never told to freeze")
    time.sleep(0.1)
def cmd(p):
    try: return open(f"/proc/{p}/cmdline", "rb").read()
    except OSError: return b""
pid = next(p for p in os.listdir("/proc") if p.isdigit() and b"/etc/clothcast/server.toml" in cmd(p))
tid = next(int(t) for t in os.listdir(f"/proc/{pid}/task")
           if open(f"/proc/{pid}/task/{t}/comm").read().strip() == "clothcast-tick")
assert libc.ptrace(0x4206, tid, None, None) == 0, "PTRACE_SEIZE"
assert libc.ptrace(0x4207, tid, None, None) == 0, "PTRACE_INTERRUPT"
status = ctypes.c_int(); libc.waitpid(tid, ctypes.byref(status), 0x40000000)
open(f"{out}/frozen.txt", "w").write(f"froze thread {tid} (clothcast-tick) of process {pid}\n")
# the thread stays frozen while this tracer lives, past the unit's 10 s watchdog
# timeout; systemd's SIGABRT then waits for the tracer to let go (a core dump gathers
# every thread, and a traced one answers only once released), which a truly stuck tick
# thread would not make it do
time.sleep(14)
FREEZE
boot 180 "$AFTER_SERVER"
wait
report refused.txt unreadable.txt watch.txt streaming.txt reload.txt rotated.txt frozen.txt during.txt after.txt stopped.txt journal.txt
grep -q 'publisher token from the systemd credential' "$OUT/journal.txt" && grep -q 'viewer token from the systemd credential' "$OUT/journal.txt" || fail "tokens not from the credentials"
grep -q '4001' "$OUT/refused.txt" && grep -q 'exit 1' "$OUT/refused.txt" || fail "a wrong token was not refused"
grep -q 'Permission denied' "$OUT/unreadable.txt" || fail "the service user can read the token file"
grep -q 'missed 0' "$OUT/watch.txt" || fail "the viewer saw no frames"
grep -q 'StatusText=3 avatars, 1 viewer, 1 publisher' "$OUT/streaming.txt" || fail "status line"
grep -q 'reload exit 0' "$OUT/reload.txt" && grep -q 'ActiveState=active' "$OUT/reload.txt" || fail "reload"
[ "$(grep -c "^MainPID=$(grep -m1 '^MainPID=' "$OUT/reload.txt" | cut -d= -f2)$" "$OUT/reload.txt")" = 2 ] || fail "a reload changed the main process"
grep -q 'tokens reloaded: publisher token from the systemd credential' "$OUT/journal.txt" || fail "tokens not reloaded"
grep -q 'unhealthy: tick stalled' "$OUT/during.txt" || fail "no unhealthy status"
grep -q "Failed with result 'watchdog'" "$OUT/journal.txt" || fail "the watchdog did not fire"
grep -q 'NRestarts=1' "$OUT/after.txt" && grep -q 'ActiveState=active' "$OUT/after.txt" || fail "not restarted"
grep -q 'ActiveState=inactive' "$OUT/stopped.txt" && grep -q 'Result=success' "$OUT/stopped.txt" || fail "did not stop cleanly"
echo "systemd check passed"
