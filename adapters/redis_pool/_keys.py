"""The Redis keys of a worker pool, and the Lua scripts that change them atomically.

Every key of one session carries the session id in braces (a Redis Cluster hash
tag), so each script touches keys of one slot. See docs/deployment.md for what
each key holds and how long it lives.
"""

from __future__ import annotations

import attrs

GROUP = "workers"
"""The consumer group on the sessions stream: a new session goes to one worker."""


@attrs.frozen
class Keys:
    """Key names under ``prefix`` (``codexcore`` unless configured)."""

    prefix: str = "codexcore"

    @property
    def sessions(self) -> str:
        """Stream of new sessions (and handed-over ones), read by the ``workers`` group."""
        return f"{self.prefix}:sessions"

    @property
    def dead_letter(self) -> str:
        """Stream of the entries no reader could decode, with why (see ``_poison``)."""
        return f"{self.prefix}:dead-letter"

    def worker(self, name: str) -> str:
        """Hash: a live worker's host, pid and view of the workspace (expires)."""
        return f"{self.prefix}:worker:{name}"

    @property
    def workers_pattern(self) -> str:
        return f"{self.prefix}:worker:*"

    def _s(self, session_id: str, what: str) -> str:
        return f"{self.prefix}:s:{{{session_id}}}:{what}"

    def events(self, session_id: str) -> str:
        """Stream of the session's encoded events, entry id ``<seq>-1``: the replay buffer."""
        return self._s(session_id, "events")

    def inbox(self, session_id: str) -> str:
        """Stream of the session's submissions, as the gateways accepted them."""
        return self._s(session_id, "in")

    def state(self, session_id: str) -> str:
        """Hash: owner, next_seq, running Task id, submission cursor, ended."""
        return self._s(session_id, "state")

    def fence(self, session_id: str) -> str:
        """Counter: the fencing number of the current ownership (one more per takeover)."""
        return self._s(session_id, "fence")

    def lease(self, session_id: str) -> str:
        """String ``<worker> <fence>`` with a TTL: the owner is alive while it exists."""
        return self._s(session_id, "lease")

    def history(self, session_id: str) -> str:
        """List of the session's rollout lines (JSONL records), for a takeover to resume."""
        return self._s(session_id, "history")

    def configs(self, session_id: str) -> str:
        """List of accepted ``configure_session`` submissions (resumed when no rollout exists)."""
        return self._s(session_id, "configs")

    def seen(self, session_id: str, submission_id: str) -> str:
        """Set-if-absent with a TTL: a submission id already accepted."""
        return self._s(session_id, f"seen:{submission_id}")

    def session_keys(self, session_id: str) -> list[str]:
        """The keys that expire once the session has ended."""
        return [
            self.events(session_id),
            self.inbox(session_id),
            self.state(session_id),
            self.fence(session_id),
            self.history(session_id),
            self.configs(session_id),
        ]


def event_id(seq: int) -> str:
    """The stream entry id of event ``seq``: ids increase with seq, and Redis refuses
    a second entry with the same id (a second writer cannot slip one in)."""
    return f"{seq}-1"


FENCED = "FENCED"
"""The error a script answers when the caller's fencing number is not the current one."""

# KEYS fence lease state; ARGV worker lease_ms.
# -> 'owned' (by a live worker) | 'gone' (ended, or expired)
#    | {fence, previous owner, running, next_seq, cursor}
TAKE = """
if redis.call('EXISTS', KEYS[2]) == 1 then return 'owned' end
if redis.call('HGET', KEYS[3], 'ended') == '1' then return 'gone' end
if redis.call('EXISTS', KEYS[3]) == 0 then return 'gone' end
local fence = redis.call('INCR', KEYS[1])
redis.call('SET', KEYS[2], ARGV[1] .. ' ' .. fence, 'PX', ARGV[2])
local previous = redis.call('HGET', KEYS[3], 'owner') or ''
redis.call('HSET', KEYS[3], 'owner', ARGV[1])
return {fence, previous, redis.call('HGET', KEYS[3], 'running') or '',
        redis.call('HGET', KEYS[3], 'next_seq') or '0',
        redis.call('HGET', KEYS[3], 'cursor') or '0-0'}
"""

# KEYS sessions (fence lease)*; ARGV worker lease_ms group (fence entry_id)*
# -> per session 1, or 0 when fenced off. One call renews every lease of a
# worker and keeps its pending entries young (XAUTOCLAIM looks elsewhere):
# one round trip, however busy the worker's loop is.
RENEW = """
local renewed = {}
for i = 2, #KEYS, 2 do
  local n = i / 2
  local fence = ARGV[2 + 2 * n]
  if redis.call('GET', KEYS[i]) == fence then
    redis.call('SET', KEYS[i + 1], ARGV[1] .. ' ' .. fence, 'PX', ARGV[2])
    redis.call('XCLAIM', KEYS[1], ARGV[3], ARGV[1], 0, ARGV[3 + 2 * n], 'JUSTID')
    renewed[n] = 1
  else
    renewed[n] = 0
  end
end
return renewed
"""

# KEYS fence events state history; ARGV fence maxlen running next_seq n (id data)*n line*
# running: '' unchanged, '-' none, else the running Task's id.
# -> {n, foreign}: foreign are entries found at or above the session's next id, which
# no owner wrote: they are taken out, so the numbering goes on, and the caller
# dead-letters them. One forged with XADD * (an id of the current time) moves the
# stream's last id far ahead even once deleted (by a gateway): a refused first XADD
# sets it back to the top entry and tries again. So a second write of a seq already
# written is still refused.
EMIT = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return redis.error_reply('FENCED') end
local n = tonumber(ARGV[5])
local next_id = (redis.call('HGET', KEYS[3], 'next_seq') or '0') .. '-1'
local foreign = redis.call('XRANGE', KEYS[2], next_id, '+', 'COUNT', 64)
for _, entry in ipairs(foreign) do redis.call('XDEL', KEYS[2], entry[1]) end
for i = 0, n - 1 do
  local id, data = ARGV[6 + 2 * i], ARGV[7 + 2 * i]
  local added = redis.pcall('XADD', KEYS[2], 'MAXLEN', '~', ARGV[2], id, 'e', data)
  if type(added) == 'table' and added.err then
    local top = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)
    redis.call('XSETID', KEYS[2], top[1] and top[1][1] or '0-0')
    redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[2], id, 'e', data)
  end
end
for i = 6 + 2 * n, #ARGV do redis.call('RPUSH', KEYS[4], ARGV[i]) end
if ARGV[3] == '-' then
  redis.call('HSET', KEYS[3], 'running', '')
elseif ARGV[3] ~= '' then
  redis.call('HSET', KEYS[3], 'running', ARGV[3])
end
redis.call('HSET', KEYS[3], 'next_seq', ARGV[4])
return {n, foreign}
"""

# KEYS fence state seen configs; ARGV fence entry_id ttl_ms config
# -> 1 fresh, 0 duplicate (ttl_ms '' : no id to check, always fresh).
ACCEPT = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return redis.error_reply('FENCED') end
redis.call('HSET', KEYS[2], 'cursor', ARGV[2])
if ARGV[3] == '' then return 1 end
if redis.call('SET', KEYS[3], '1', 'NX', 'PX', ARGV[3]) then
  if ARGV[4] ~= '' then redis.call('RPUSH', KEYS[4], ARGV[4]) end
  return 1
end
return 0
"""

# KEYS fence lease state sessions (session keys)*; ARGV fence group entry_id ttl_s
END = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return redis.error_reply('FENCED') end
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[3], 'ended', '1', 'running', '')
redis.call('XACK', KEYS[4], ARGV[2], ARGV[3])
redis.call('XDEL', KEYS[4], ARGV[3])
for i = 5, #KEYS do redis.call('EXPIRE', KEYS[i], ARGV[4]) end
return 1
"""

# KEYS fence lease sessions; ARGV fence group entry_id session_id -> the new entry id
# A worker stopping gracefully: the session is offered to the others at once.
HAND_OVER = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return redis.error_reply('FENCED') end
redis.call('DEL', KEYS[2])
redis.call('XACK', KEYS[3], ARGV[2], ARGV[3])
redis.call('XDEL', KEYS[3], ARGV[3])
return redis.call('XADD', KEYS[3], '*', 'session', ARGV[4])
"""

# KEYS lease; ARGV worker -> 1 when the lease was that worker's and is gone now.
# A worker whose connections Redis saw close (a killed process) need not be
# waited for until its lease runs out.
RELEASE = """
local holder = redis.call('GET', KEYS[1])
if holder and string.sub(holder, 1, #ARGV[1] + 1) == ARGV[1] .. ' ' then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
"""

WORKER_CLIENT = "codexcore-worker."
"""The connection name of a worker's Redis connections (``CLIENT SETNAME``), then its name."""
