//! The registry of open calls in Redis, as Lua scripts: each one runs atomically, so a lookup
//! and what it decides (a waiting binding claimed, a waiting binding recorded) cannot interleave
//! with another replica's. Time is Redis's own (`TIME`), so replicas' clocks do not matter.
//!
//! Keys, all under the prefix `P` (ARGV[1]); members name an open call as `replica|stream|call`:
//! - `P:a:<name>:<args digest>`, `P:n:<name>`, `P:c:<call id>`: open calls by name and
//!   arguments, by name, by call id (sorted sets scored by their expiry, in ms);
//! - `P:t:<trace>:<name>`: open calls by trace id and name (member `digest|replica|stream|call`);
//! - `P:wa:<name>:<digest>`, `P:wt:<trace>:<name>`: MCP calls waiting for their call
//!   (member `replica|binding|trace or -` and `replica|binding|digest`, scored by the end of
//!   their bind window).
//!
//! Every key gets a TTL at least as long as its newest member's, so a replica killed without a
//! goodbye leaves nothing behind for longer than the registration TTL; expired members are
//! dropped whenever a script reads the key. Redis Cluster is not supported (the scripts compute
//! keys): one primary, with replicas or Sentinel if wanted, or Valkey.

use redis::Script;

/// Helpers every script starts with.
const PRELUDE: &str = r#"
local P = ARGV[1]
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function add(key, score, member, ttl)
  redis.call('ZADD', key, score, member)
  if redis.call('PTTL', key) < ttl then redis.call('PEXPIRE', key, ttl) end
end
local function live(key, now)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  return redis.call('ZRANGE', key, 0, -1)
end
local function owner_of(member)
  return string.match(member, '^([^|]*|[^|]*)|')
end
-- One stream's call, or 'ambiguous' when calls of two streams are in `members`.
local function distinct(members)
  if #members == 0 then return {'none'} end
  local owner = owner_of(members[1])
  for i = 2, #members do
    if owner_of(members[i]) ~= owner then return {'ambiguous'} end
  end
  return {'one', members[1]}
end
-- The open call a (name, digest, trace) means: by trace first (a trace id is the client's, so
-- two streams may share one: the digest then has to single one out, else it is ambiguous; in
-- one stream it picks among parallel calls of the tool), else by name and digest under the
-- ambiguity rule.
local function find(name, digest, trace, now)
  if trace ~= '' then
    local traced = live(P .. ':t:' .. trace .. ':' .. name, now)
    if #traced > 0 then
      local streams, exact, n, n_exact = {}, {}, 0, 0
      for _, m in ipairs(traced) do
        local d, rest = string.match(m, '^([^|]*)|(.*)$')
        local o = owner_of(rest)
        if streams[o] == nil then streams[o] = rest; n = n + 1 end
        if d == digest and exact[o] == nil then exact[o] = rest; n_exact = n_exact + 1 end
      end
      if n_exact == 1 then
        for _, rest in pairs(exact) do return {'one', rest} end
      end
      if n == 1 and n_exact == 0 then
        return {'one', string.match(traced[1], '^[^|]*|(.*)$')}
      end
      return {'ambiguous'}
    end
  end
  if digest == '' then return distinct(live(P .. ':n:' .. name, now)) end
  return distinct(live(P .. ':a:' .. name .. ':' .. digest, now))
end
"#;

/// ARGV: P, replica, stream, call id, name, digest, trace (or ""), ttl ms. Registers an open
/// call (again: a refresh is the same) and resolves the waiting MCP calls it may be for; each
/// resolved one is claimed (removed) and its replica told on its channel. Returns how many.
const REGISTER: &str = r#"
local replica, stream, call, name, digest, trace = ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]
local ttl = tonumber(ARGV[8])
local now = now_ms()
local member = replica .. '|' .. stream .. '|' .. call
add(P .. ':a:' .. name .. ':' .. digest, now + ttl, member, ttl)
add(P .. ':n:' .. name, now + ttl, member, ttl)
add(P .. ':c:' .. call, now + ttl, member, ttl)
if trace ~= '' then add(P .. ':t:' .. trace .. ':' .. name, now + ttl, digest .. '|' .. member, ttl) end
local resolved = 0
local function resolve(wreplica, binding, wdigest, wtrace)
  local found = find(name, wdigest, wtrace, now)
  if found[1] == 'none' then return end
  local t = wtrace
  if t == '' then t = '-' end
  redis.call('ZREM', P .. ':wa:' .. name .. ':' .. wdigest, wreplica .. '|' .. binding .. '|' .. t)
  if wtrace ~= '' then
    redis.call('ZREM', P .. ':wt:' .. wtrace .. ':' .. name, wreplica .. '|' .. binding .. '|' .. wdigest)
  end
  local message = {k = found[1], binding = binding, to = found[2]}
  redis.call('PUBLISH', P .. ':replica:' .. wreplica, cjson.encode(message))
  resolved = resolved + 1
end
for _, w in ipairs(live(P .. ':wa:' .. name .. ':' .. digest, now)) do
  local wreplica, binding, wtrace = string.match(w, '^([^|]*)|([^|]*)|(.*)$')
  if wtrace == '-' then wtrace = '' end
  resolve(wreplica, binding, digest, wtrace)
end
if trace ~= '' then
  for _, w in ipairs(live(P .. ':wt:' .. trace .. ':' .. name, now)) do
    local wreplica, binding, wdigest = string.match(w, '^([^|]*)|([^|]*)|(.*)$')
    resolve(wreplica, binding, wdigest, trace)
  end
end
return resolved
"#;

/// ARGV: P, replica, stream, call id, name, digest, trace (or ""). The call closed.
const UNREGISTER: &str = r#"
local replica, stream, call, name, digest, trace = ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]
local member = replica .. '|' .. stream .. '|' .. call
redis.call('ZREM', P .. ':a:' .. name .. ':' .. digest, member)
redis.call('ZREM', P .. ':n:' .. name, member)
redis.call('ZREM', P .. ':c:' .. call, member)
if trace ~= '' then redis.call('ZREM', P .. ':t:' .. trace .. ':' .. name, digest .. '|' .. member) end
return 1
"#;

/// ARGV: P, replica, binding, name, digest, trace (or ""), window ms. An MCP call binds: to
/// the call it means now (`one`, member), to none (`ambiguous`), or it waits (`wait`):
/// recorded for the register script to resolve within the window.
const BIND: &str = r#"
local replica, binding, name, digest, trace = ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local window = tonumber(ARGV[7])
local now = now_ms()
local found = find(name, digest, trace, now)
if found[1] ~= 'none' then return found end
local t = trace
if t == '' then t = '-' end
add(P .. ':wa:' .. name .. ':' .. digest, now + window, replica .. '|' .. binding .. '|' .. t, window)
if trace ~= '' then
  add(P .. ':wt:' .. trace .. ':' .. name, now + window, replica .. '|' .. binding .. '|' .. digest, window)
end
return {'wait'}
"#;

/// ARGV: P, "call" and a call id, or "tool", a name and a digest (or "" for any arguments).
/// `POST /v1/progress`'s lookup: `one` and the member, `ambiguous`, or `none`.
const FIND: &str = r#"
local now = now_ms()
if ARGV[2] == 'call' then return distinct(live(P .. ':c:' .. ARGV[3], now)) end
return find(ARGV[3], ARGV[4], '', now)
"#;

/// The registry's scripts, loaded once per process (redis-rs sends `EVALSHA` and loads a
/// script again when a restarted server no longer has it).
pub struct Scripts {
    pub register: Script,
    pub unregister: Script,
    pub bind: Script,
    pub find: Script,
}

impl Default for Scripts {
    fn default() -> Self {
        let script = |body: &str| Script::new(&format!("{PRELUDE}{body}"));
        Scripts {
            register: script(REGISTER),
            unregister: script(UNREGISTER),
            bind: script(BIND),
            find: script(FIND),
        }
    }
}

/// A script's answer to a lookup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    One(super::keys::Owner),
    Ambiguous,
    None,
    Wait,
}

impl Lookup {
    /// Reads a script's reply (`{'one', member}`, `{'ambiguous'}`, `{'none'}`, `{'wait'}`);
    /// `None` for anything else.
    pub fn read(reply: &[String]) -> Option<Lookup> {
        match reply {
            [kind, member] if kind == "one" => super::keys::Owner::parse(member).map(Lookup::One),
            [kind] if kind == "ambiguous" => Some(Lookup::Ambiguous),
            [kind] if kind == "none" => Some(Lookup::None),
            [kind] if kind == "wait" => Some(Lookup::Wait),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_read_strictly() {
        let one = Lookup::read(&["one".into(), "r|3|call_1".into()]);
        assert!(matches!(one, Some(Lookup::One(o)) if o.stream == 3 && o.call_id == "call_1"));
        assert_eq!(Lookup::read(&["ambiguous".into()]), Some(Lookup::Ambiguous));
        assert_eq!(Lookup::read(&["none".into()]), Some(Lookup::None));
        assert_eq!(Lookup::read(&["wait".into()]), Some(Lookup::Wait));
        assert_eq!(Lookup::read(&["one".into(), "garbage".into()]), None);
        assert_eq!(Lookup::read(&[]), None);
    }
}
