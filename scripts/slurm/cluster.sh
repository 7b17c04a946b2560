#!/usr/bin/env bash
# A throwaway single-node SLURM cluster with accounting, from Debian's packages, for `make test-slurm`.
#
#   scripts/slurm/cluster.sh up             # install if needed; start munge, MariaDB and the slurm daemons
#   eval "$(scripts/slurm/cluster.sh env)"  # SLURM_CONF, for sinfo, sbatch, sacct and submitit
#   scripts/slurm/cluster.sh down           # stop what `up` started, by the pids it recorded; keep logs
#
# Everything but the packages and munge's key lives in $SLURM_CI_DIR (default /dev/shm/noisydml-slurm):
# configs, controller state, spool, logs, the database and the pid files. `up` first stops the daemons
# a previous `up` left running, then starts from empty state, so job ids and accounting begin afresh.
# Accounting is not optional: without it submitit cannot learn that a job died hard (SIGKILL, OOM) and
# waits for its result forever. Needs root and no systemd; daemons are stopped by pid, never by name.
set -euo pipefail
export LC_NUMERIC=C # for EPOCHREALTIME's decimal point

# On a RAM disk when there is room (the database takes ~100 MB; Docker's default /dev/shm is 64 MB):
# MariaDB and slurmctld fsync often, and fsync is slow on CI disks (bring-up 4 s there, 14 s on disk).
if [[ -w /dev/shm ]] && (($(df -Pk /dev/shm | awk 'NR == 2 { print $4 }') > 512 * 1024)); then
    DIR=${SLURM_CI_DIR:-/dev/shm/noisydml-slurm}
else
    DIR=${SLURM_CI_DIR:-/tmp/noisydml-slurm}
fi
DB_PORT=${SLURM_CI_DB_PORT:-3306}
CLUSTER=noisydml-ci
PACKAGES=(munge slurmctld slurmd slurm-client slurmdbd mariadb-server)
# Slurm's own ports (slurmctld, slurmd, slurmdbd); a second cluster on this machine would collide.
SLURM_PORTS=(6817 6818 6819)
# Stopped in this order: clients of a daemon before the daemon.
DAEMONS=(slurmd slurmctld slurmdbd mariadbd munged)

say() { echo "slurm-ci: $*"; }
# die MESSAGE [LOG...]: say what went wrong, with the end of each log that tells more.
die() {
    echo "slurm-ci: error: $1" >&2
    local log
    for log in "${@:2}"; do
        [[ -s $log ]] && { echo "--- last lines of $log" >&2; tail -n 25 "$log" >&2; }
    done
    exit 1
}

# wait_for SECONDS WHAT LOG COMMAND...: poll COMMAND until it succeeds; fail naming WHAT and its log.
wait_for() {
    local seconds=$1 what=$2 log=$3
    shift 3
    local deadline=$((SECONDS + seconds))
    until "$@" >/dev/null 2>&1; do
        ((SECONDS < deadline)) || die "$what did not come up within ${seconds}s" "$log"
        sleep 0.1
    done
}

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

install_packages() {
    local missing=0 cmd
    for cmd in munged slurmctld slurmd sinfo slurmdbd mariadbd mariadb-install-db; do
        command -v "$cmd" >/dev/null || missing=1
    done
    ((missing)) || return 0
    command -v apt-get >/dev/null || die "apt-get not found: this script installs Debian's slurm packages"
    say "installing ${PACKAGES[*]}"
    # Keep the packages' init scripts from starting unconfigured daemons (and MariaDB on its own).
    local created_policy=0
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod 755 /usr/sbin/policy-rc.d
        created_policy=1
    fi
    local status=0
    {
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
            --no-install-recommends -o Dpkg::Use-Pty=0 "${PACKAGES[@]}"
    } >"$DIR/apt.log" 2>&1 || status=$?
    ((created_policy)) && rm -f /usr/sbin/policy-rc.d
    ((status == 0)) || die "apt-get install ${PACKAGES[*]} failed" "$DIR/apt.log"
}

# The pid a daemon recorded, if that process still runs under the daemon's name (pids get reused).
running_pid() {
    local name=$1 file="$DIR/pids/$1.pid" pid
    [[ -s $file ]] || return 1
    pid=$(<"$file")
    [[ $pid =~ ^[0-9]+$ && -r /proc/$pid/comm && $(</proc/"$pid"/comm) == "$name" ]] || return 1
    echo "$pid"
}

# A daemon that exited is gone for us even while it waits, a zombie, for init to reap it.
alive() {
    local stat
    { read -r stat <"/proc/$1/stat"; } 2>/dev/null || return 1
    stat=${stat##*) }
    [[ ${stat%% *} != Z ]]
}

stop() {
    local name pid i
    for name in "${DAEMONS[@]}"; do
        if pid=$(running_pid "$name") && alive "$pid"; then
            kill -TERM "$pid" 2>/dev/null || true
            for ((i = 0; i < 100; i++)); do
                alive "$pid" || break
                sleep 0.1
            done
            if alive "$pid"; then
                say "$name (pid $pid) ignored SIGTERM for 10s; sending SIGKILL"
                kill -KILL "$pid" 2>/dev/null || true
            fi
            say "stopped $name (pid $pid)"
        fi
        rm -f "$DIR/pids/$name.pid"
    done
    # The database is most of $DIR (~100 MB, in RAM on /dev/shm); the logs stay for a look.
    rm -rf "${DIR:?}/mysql"
}

start_munge() {
    if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
        say "using the munged already running (not stopped by down)"
        return
    fi
    install -d -o munge -g munge -m 755 /run/munge
    [[ -s /etc/munge/munge.key ]] || runuser -u munge -- mungekey --create >/dev/null
    runuser -u munge -- /usr/sbin/munged --force || die "munged did not start" /var/log/munge/munged.log
    wait_for 10 munged /var/log/munge/munged.log bash -c 'munge -n | unmunge'
    cp /run/munge/munged.pid "$DIR/pids/munged.pid"
}

start_mariadb() {
    install -d -o mysql -g mysql "$DIR/mysql" "$DIR/mysql-run"
    # A throwaway database: no durability, a small redo log.
    local options=(--no-defaults --user=mysql --datadir="$DIR/mysql" --innodb-log-file-size=8M
        --innodb-flush-log-at-trx-commit=0 --skip-innodb-doublewrite)
    mariadb-install-db "${options[@]}" --skip-test-db --auth-root-authentication-method=socket \
        >"$DIR/log/mariadb-install.log" 2>&1 || die "mariadb-install-db failed" "$DIR/log/mariadb-install.log"
    # slurmdbd wants innodb_lock_wait_timeout >= 900.
    setsid mariadbd "${options[@]}" --socket="$DIR/mysql-run/mysqld.sock" \
        --pid-file="$DIR/mysql-run/mariadbd.pid" --bind-address=127.0.0.1 --port="$DB_PORT" \
        --skip-name-resolve --skip-log-bin --innodb-lock-wait-timeout=900 \
        --log-error="$DIR/log/mariadb.log" </dev/null >/dev/null 2>&1 &
    wait_for 30 MariaDB "$DIR/log/mariadb.log" test -S "$DIR/mysql-run/mysqld.sock"
    wait_for 10 "MariaDB's pid file" "$DIR/log/mariadb.log" test -s "$DIR/mysql-run/mariadbd.pid"
    ln -sf "$DIR/mysql-run/mariadbd.pid" "$DIR/pids/mariadbd.pid"
    DB_PASSWORD=$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
    mariadb --no-defaults --socket="$DIR/mysql-run/mysqld.sock" -u root -e "
        CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$DB_PASSWORD';
        GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';" ||
        die "could not create MariaDB's slurm user" "$DIR/log/mariadb.log"
}

write_configs() {
    local host mem_mb
    host=$(hostname -s)
    mem_mb=$(awk '/^MemTotal:/ { printf "%d", $2 / 1024 * 0.85 }' /proc/meminfo)
    cat >"$DIR/etc/slurm.conf" <<EOF
# Written by scripts/slurm/cluster.sh: a single-node cluster for tests, state under $DIR.
ClusterName=$CLUSTER
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MailProg=/bin/true
KillWait=5
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/pids/slurmctld.pid
SlurmdPidFile=$DIR/pids/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=$mem_mb State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
    # slurmdbd reads slurmdbd.conf beside $SLURM_CONF and refuses it unless only its owner can read it.
    install -m 600 /dev/null "$DIR/etc/slurmdbd.conf"
    cat >"$DIR/etc/slurmdbd.conf" <<EOF
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
SlurmUser=root
PidFile=$DIR/pids/slurmdbd.pid
LogFile=$DIR/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=$DB_PASSWORD
StorageLoc=slurm_acct_db
EOF
}

node_idle() { [[ $(sinfo -h -o %T) == idle ]]; }

up() {
    ((EUID == 0)) || die "the cluster needs root (apt-get; daemons that run as root, munge and mysql)"
    # `up` empties its folders in $DIR: never a folder this script did not make.
    if [[ -d $DIR && -n $(ls -A "$DIR") && ! -e $DIR/.slurm-ci ]]; then
        die "SLURM_CI_DIR=$DIR holds files this script did not write; give it an empty or new folder"
    fi
    mkdir -p "$DIR"
    touch "$DIR/.slurm-ci"
    install_packages
    local started=$EPOCHREALTIME
    stop
    local port
    for port in "${SLURM_PORTS[@]}" "$DB_PORT"; do
        listening "$port" && die "port $port is taken by a process this script did not start (\`ss -ltnp\`
  names it): stop it, or for MariaDB's port set SLURM_CI_DB_PORT"
    done
    rm -rf "${DIR:?}"/{etc,state,spool,log,pids,mysql,mysql-run}
    mkdir -p "$DIR"/{etc,state,spool,log,pids}
    export SLURM_CONF=$DIR/etc/slurm.conf

    start_munge
    start_mariadb
    write_configs
    slurmdbd || die "slurmdbd did not start" "$DIR/log/slurmdbd.log"
    wait_for 30 slurmdbd "$DIR/log/slurmdbd.log" listening 6819
    sacctmgr -i add cluster "$CLUSTER" >/dev/null ||
        die "sacctmgr could not add the cluster to accounting" "$DIR/log/slurmdbd.log"
    slurmctld || die "slurmctld did not start" "$DIR/log/slurmctld.log"
    wait_for 30 slurmctld "$DIR/log/slurmctld.log" scontrol ping
    slurmd || die "slurmd did not start" "$DIR/log/slurmd.log"
    wait_for 30 "an idle node" "$DIR/log/slurmd.log" node_idle
    [[ $(timeout 30 srun -N1 -n1 hostname 2>"$DIR/log/srun.log") == "$(hostname)" ]] ||
        die "srun could not run a job step on the node" "$DIR/log/srun.log" "$DIR/log/slurmd.log"
    say "cluster $CLUSTER up in $(awk "BEGIN { printf \"%.1f\", $EPOCHREALTIME - $started }")s" \
        "($(sinfo -h -o '%D node, %c CPUs, %m MB'), accounting in MariaDB; state in $DIR)"
}

print_env() {
    [[ -f $DIR/etc/slurm.conf ]] || die "no cluster: run \`$0 up\` first"
    echo "export SLURM_CONF=$DIR/etc/slurm.conf"
}

case ${1:-} in
up) up ;;
env) print_env ;;
down) stop ;;
*)
    echo "usage: $0 up|env|down" >&2
    exit 2
    ;;
esac
