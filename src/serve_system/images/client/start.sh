#!/bin/sh
# The rehearsal Jupyter image's start (tini runs it as its one child): the user switch of the
# docker-stacks images (quay.io/jupyter/*) that the lab runs on a real node, written for this image.
#
# Started as root (the stack's compose file runs the container as "0:0"), it runs its command as the
# notebook user jovyan with uid NB_UID (default 1000) and primary group NB_GID (default 100, "users"),
# HOME its home folder; when NB_UID or NB_GID differ from jovyan's, jovyan is changed to them first
# (usermod moves its home's files along) and stays in "users". Started as any other user, it runs the
# command as that user, unchanged. `docker exec` bypasses it and runs as the container's user (root).
set -eu

user=jovyan
uid=${NB_UID:-1000}
gid=${NB_GID:-100}

[ "$#" -gt 0 ] || set -- bash

if [ "$(id -u)" != 0 ]; then
    exec "$@"
fi

for id in "$uid" "$gid"; do
    case $id in
        *[!0-9]*)
            echo "start.sh: NB_UID and NB_GID must be numeric ids (NB_UID='$uid' NB_GID='$gid'); fix the container's environment" >&2
            exit 64
            ;;
    esac
done

if [ "$(id -u "$user")" != "$uid" ] || [ "$(id -g "$user")" != "$gid" ]; then
    getent group "$gid" >/dev/null || groupadd --gid "$gid" "notebook$gid"
    usermod --non-unique --uid "$uid" --gid "$gid" --append --groups users "$user"
    echo "start.sh: $user is now uid $uid, gid $gid" >&2
fi

HOME=$(getent passwd "$user" | cut -d: -f6)
USER=$user
LOGNAME=$user
export HOME USER LOGNAME
# setpriv (util-linux) execs the command itself: no process stays between tini and Jupyter, and the
# environment (the stack's TRITON_SERVER_URL, ...) passes through as it is
exec setpriv --reuid="$uid" --regid="$gid" --init-groups -- "$@"
