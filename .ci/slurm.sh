#!/usr/bin/env bash
# A real single-node Slurm (slurmctld, slurmd, slurmdbd with MariaDB for accounting, munge) on
# loopback only, without systemd, for the tests of `eebench run --backend slurm`.
#
#   .ci/slurm.sh start    install the packages if missing, start the daemons, wait for a job
#   .ci/slurm.sh env      print the line to eval: export SLURM_CONF=...
#   .ci/slurm.sh stop     stop the daemons by their recorded PIDs, remove the state directory
#   .ci/slurm.sh status   the recorded daemons and whether each is alive
#
# Everything lives under $EEBENCH_SLURM_DIR (default /tmp/eebench-slurm), outside the repository;
# nothing goes to /etc. Needs root. The munge and mysql users must be able to enter that path.
# $EEBENCH_SLURM_PORT (default 6817) is slurmctld's port; slurmd and slurmdbd take the next two.
set -euo pipefail

DIR="${EEBENCH_SLURM_DIR:-/tmp/eebench-slurm}"
PORT="${EEBENCH_SLURM_PORT:-6817}"
DAEMONS=(munged mariadbd slurmdbd slurmctld slurmd)  # start order; stop is the reverse

say() { echo "slurm.sh: $*" >&2; }
die() { say "$*"; exit 1; }

install_packages() {
  local missing=0 cmd
  for cmd in munged mungekey mariadbd mariadb-install-db slurmdbd slurmctld slurmd sbatch sacct; do
    command -v "$cmd" >/dev/null 2>&1 || missing=1
  done
  [[ $missing == 0 ]] && return 0
  [[ $(id -u) == 0 ]] || die "the packages are missing and installing them needs root"
  say "installing slurm-wlm munge slurmdbd mariadb-server"
  # A policy-rc.d refusing every start keeps the packages' own scripts from starting daemons.
  local policy=/usr/sbin/policy-rc.d added=0
  if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && added=1
  fi
  (apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      slurm-wlm munge slurmdbd mariadb-server) >/dev/null
  [[ $added == 1 ]] && rm -f "$policy"
  return 0
}

alive() {  # a recorded PID that still runs (a zombie waiting to be reaped counts as gone)
  local pid=$1 state
  [[ -d /proc/$pid ]] || return 1
  state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || echo Z)
  [[ $state != Z ]]
}

ours() {  # the PID still runs the daemon recorded (PIDs are reused)
  local name=$1 pid=$2 exe
  alive "$pid" || return 1
  exe=$(readlink "/proc/$pid/exe" 2>/dev/null || true)
  [[ $(basename "$exe") == "$name"* ]]
}

node_name() {
  # The daemons keep the hostname when it resolves to loopback; otherwise they run in their own
  # UTS namespace named localhost, so that nothing listens on another address.
  local host addr
  host=$(hostname -s)
  addr=$(getent ahostsv4 "$host" 2>/dev/null | awk 'NR==1{print $1}')
  if [[ $addr == 127.* ]]; then echo "$host"; else echo localhost; fi
}

launch() {  # launch NAME COMMAND...: in the background, its own session, PID recorded
  local name=$1; shift
  local wrap=()
  if [[ $(node_name) != $(hostname -s) ]]; then
    wrap=(unshare --uts sh -c 'hostname localhost && exec "$@"' sh)
  fi
  setsid "${wrap[@]}" "$@" >>"$DIR/log/$name.out" 2>&1 </dev/null &
  echo $! >"$DIR/pids/$name"
}

wait_for() {  # wait_for WHAT SECONDS COMMAND...
  local what=$1 seconds=$2 i; shift 2
  for ((i = 0; i < seconds * 5; i++)); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  say "timed out waiting for $what; logs in $DIR/log"
  tail -n 20 "$DIR"/log/* >&2 || true
  return 1
}

write_configs() {
  local node=$1 cpus mem
  cpus=$(nproc)
  mem=$(awk '/MemTotal/ {print int($2 / 1024 / 2)}' /proc/meminfo)
  cat >"$DIR/etc/slurm.conf" <<EOF
ClusterName=eebench
SlurmctldHost=$node
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$DIR/munge/munge.sock
CommunicationParameters=NoInAddrAny,NoCtldInAddrAny
StateSaveLocation=$DIR/spool/ctld
SlurmdSpoolDir=$DIR/spool/d
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
ReturnToService=2
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0,sched_interval=1,bf_interval=1
KillWait=2
MinJobAge=300
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=$node
AccountingStoragePort=$((PORT + 2))
AccountingStoragePass=$DIR/munge/munge.sock
FirstJobId=$(($(date +%s) % 60000000 + 1))
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
  cat >"$DIR/etc/slurmdbd.conf" <<EOF
AuthType=auth/munge
AuthInfo=socket=$DIR/munge/munge.sock
CommunicationParameters=NoInAddrAny
DbdHost=$node
DbdPort=$((PORT + 2))
SlurmUser=root
PidFile=$DIR/run/slurmdbd.pid
LogFile=$DIR/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=root
StorageLoc=slurm_acct_db
EOF
  chmod 600 "$DIR/etc/slurmdbd.conf"
}

start() {
  [[ $(id -u) == 0 ]] || die "start needs root"
  local f
  for f in "$DIR"/pids/*; do  # a directory left by a start that died is cleared below
    [[ -f $f ]] && alive "$(cat "$f")" && die "already started in $DIR (run: $0 stop)"
  done
  install_packages
  local node
  node=$(node_name)
  rm -rf "$DIR"
  # 0755 and 0711 where the munge and mysql users must enter (mktemp -d would give 0700)
  mkdir -p "$DIR"/{etc,log,pids,run,spool/ctld,spool/d,munge,mysql,mysql-run}
  chmod 755 "$DIR" "$DIR"/{etc,log,pids,run,spool,mysql-run}
  chown munge:munge "$DIR/munge" && chmod 711 "$DIR/munge"
  chown mysql:mysql "$DIR/mysql" "$DIR/mysql-run"
  local user
  for user in munge mysql; do  # a parent directory closed to them makes mariadbd crash, not fail
    setpriv --reuid="$user" --regid="$user" --init-groups test -x "$DIR/$user" ||
      die "user $user cannot enter $DIR (a parent directory is closed to it); set EEBENCH_SLURM_DIR"
  done
  write_configs "$node"

  mungekey --create --keyfile="$DIR/munge/munge.key" 2>/dev/null
  chown munge:munge "$DIR/munge/munge.key" && chmod 400 "$DIR/munge/munge.key"
  launch munged setpriv --reuid=munge --regid=munge --init-groups \
    munged --foreground --force --socket="$DIR/munge/munge.sock" \
    --key-file="$DIR/munge/munge.key" --pid-file="$DIR/munge/munged.pid" \
    --log-file="$DIR/munge/munged.log" --seed-file="$DIR/munge/munged.seed"
  wait_for munged 10 munge -S "$DIR/munge/munge.sock" -n

  mariadb-install-db --datadir="$DIR/mysql" --user=mysql --skip-test-db \
    --auth-root-authentication-method=socket >"$DIR/log/mariadb-install.log" 2>&1
  local sock=$DIR/mysql-run/mysqld.sock
  launch mariadbd mariadbd --no-defaults --datadir="$DIR/mysql" --user=mysql \
    --socket="$sock" --pid-file="$DIR/mysql-run/mariadbd.pid" \
    --log-error="$DIR/mysql-run/mariadbd.err" --skip-networking \
    --innodb-buffer-pool-size=32M
  wait_for mariadbd 30 test -S "$sock"

  export SLURM_CONF=$DIR/etc/slurm.conf
  MYSQL_UNIX_PORT=$sock launch slurmdbd slurmdbd -D
  wait_for slurmdbd 30 sacctmgr -n list cluster
  launch slurmctld slurmctld -D -i
  wait_for slurmctld 30 scontrol ping
  launch slurmd slurmd -D -N "$node"
  wait_for "node $node" 30 sh -c "sinfo -h -n '$node' -o %t | grep -Eq '^(idle|mix|alloc)'"
  # a first job through the queue, and its record in the accounting (what submitit reads)
  local job
  job=$(sbatch --parsable --output=/dev/null --time=1 --wrap true)
  wait_for "job $job in sacct" 30 sh -c "sacct -n -X -j '$job' -o State | grep -q COMPLETED"
  say "started in $DIR (node $node, ports $PORT-$((PORT + 2)))"
  echo "export SLURM_CONF=$SLURM_CONF"
}

stop() {
  local i t name pid pids=()
  [[ -d $DIR ]] || return 0
  export SLURM_CONF=$DIR/etc/slurm.conf
  # jobs still queued or running (a test that failed half-way) go first, with their processes
  if [[ -f $DIR/pids/slurmctld ]] && alive "$(cat "$DIR/pids/slurmctld")"; then
    scancel --full --user="$(id -un)" >/dev/null 2>&1 || true
    for ((t = 0; t < 50; t++)); do
      [[ -z $(squeue --noheader 2>/dev/null) ]] && break
      sleep 0.2
    done
  fi
  for ((i = ${#DAEMONS[@]} - 1; i >= 0; i--)); do
    name=${DAEMONS[i]}
    [[ -f $DIR/pids/$name ]] || continue
    pid=$(cat "$DIR/pids/$name")
    if ours "$name" "$pid" || ours setpriv "$pid"; then
      kill -TERM "$pid" 2>/dev/null || true
      pids+=("$pid")
    fi
    for ((t = 0; t < 50; t++)); do alive "$pid" || break; sleep 0.1; done
    alive "$pid" && kill -KILL "$pid" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do
    for ((t = 0; t < 30; t++)); do alive "$pid" || break; sleep 0.1; done
  done
  rm -rf "$DIR"
  say "stopped"
}

status() {
  local name pid
  [[ -d $DIR/pids ]] || { echo "not started ($DIR)"; return 1; }
  for name in "${DAEMONS[@]}"; do
    pid=$(cat "$DIR/pids/$name" 2>/dev/null || echo -)
    if [[ $pid != - ]] && alive "$pid"; then echo "$name $pid running"
    else echo "$name $pid gone"; fi
  done
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  env) echo "export SLURM_CONF=$DIR/etc/slurm.conf" ;;
  status) status ;;
  *) die "usage: $0 start|stop|env|status" ;;
esac
