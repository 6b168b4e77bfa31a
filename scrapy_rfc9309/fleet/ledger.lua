-- The fleet's politeness ledger in Redis: when each politeness unit may start its
-- next request, which process fetches a robots.txt, and the shared request queue
-- that hands a unit's requests out only when the unit may start one.
--
-- One script, loaded once per server (EVALSHA): ARGV[1] names the function, the
-- other ARGV are its arguments, in the order of its parameters (documented with
-- each).  Times are the server's (TIME), in microseconds, so the machines' clocks
-- do not matter; durations are microseconds, or milliseconds where said.
--
-- A unit's record (a hash at the unit's key, `{prefix}:{unit}`):
--   busy   until when a request is on the wire (its lease: a process killed
--          mid-request holds the unit no longer);
--   owner  the token of the acquisition that holds it;
--   end    when the fleet's last request to it ended;
--   floor  the largest floor any process asked for (end to start);
--   hold   until when it is held (it asked to slow down).
-- Records expire ten idle minutes after they last matter.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
-- Numbers are written with %.0f: Lua's own tostring keeps 14 digits, not a microsecond.
local function int(n) return string.format('%.0f', n) end

local calls = {}
-- While another request holds a unit, ask again after its floor, and no sooner than
-- this: a unit with no floor yet (its robots.txt on the wire) is not polled endlessly.
local POLL = 50000

-- Units -----------------------------------------------------------------------

local function load(key, floor)
  local stored = redis.call('HMGET', key, 'busy', 'end', 'floor', 'hold', 'owner')
  return {
    key = key,
    busy = tonumber(stored[1]) or 0,
    last_end = tonumber(stored[2]) or 0,
    floor = math.max(tonumber(floor) or 0, tonumber(stored[3]) or 0),
    hold = tonumber(stored[4]) or 0,
    owner = stored[5],
  }
end

local function store(unit)
  redis.call('HSET', unit.key, 'busy', int(unit.busy), 'end', int(unit.last_end),
    'floor', int(unit.floor), 'hold', int(unit.hold))
  local last = math.max(unit.busy, unit.hold, unit.last_end + unit.floor)
  redis.call('PEXPIRE', unit.key, math.floor((last - now) / 1000) + 600000)
end

-- THE RULE: how long until the unit may start a request (0: now).  Not before its
-- hold ends, nor while a request holds it, nor before `floor` after the last end.
-- While held by a request, the answer is when to ask again: after `poll`, or when
-- the hold's lease ends if sooner.
local function wait_of(unit, poll)
  if now < unit.hold then return unit.hold - now end
  if now < unit.busy then return math.max(math.min(unit.busy - now, poll), 1000) end
  return math.max(unit.last_end + unit.floor - now, 0)
end

local function take(unit, lease, token)
  unit.busy = now + lease
  unit.owner = token
  redis.call('HSET', unit.key, 'owner', token)
  store(unit)
end

-- The acquisition `token` ended (reached: the site saw its request, else the unit
-- is free again with its last end unchanged).  A token the unit is no longer held
-- for (its lease ended and another took it: a release that came late) changes
-- nothing ('' releases whichever).  Returns 1 if it released.
local function let_go(unit, token, reached)
  if token ~= '' and unit.owner and unit.owner ~= token then return 0 end
  unit.busy = now
  if reached then unit.last_end = now end
  store(unit)
  return 1
end

-- KEYS[1] = the unit's key.  Holds the unit for `token` for `lease` if it may start
-- now (returns 0), else returns how long to wait before asking again.
-- An acquisition already holding the unit (`token` is its owner: a request its
-- pop took, whose process learnt a larger floor since) is asked the floor again.
function calls.acquire(floor, lease, token)
  local unit = load(KEYS[1], floor)
  if token ~= '' and unit.owner == token then unit.busy = 0 end
  local wait = wait_of(unit, math.max(unit.floor, POLL))
  if wait == 0 then take(unit, tonumber(lease), token) end
  return wait
end

-- KEYS[1] = the unit's key.  The request of acquisition `token` ended now;
-- `reached`: '1' if the site saw it, '0' if not (the last end stays).
function calls.release(floor, token, reached)
  return let_go(load(KEYS[1], floor), token, reached ~= '0')
end

-- KEYS[1] = the unit's key.  No request starts for `seconds` (microseconds).
function calls.hold(seconds)
  local unit = load(KEYS[1], 0)
  unit.hold = math.max(unit.hold, now + tonumber(seconds))
  store(unit)
  return 1
end

-- KEYS[1] = the holds' sorted set (every process reads it): `unit` is held for
-- `seconds` (microseconds) from now.
function calls.announce(unit, seconds)
  local ending = now + tonumber(seconds)
  local known = tonumber(redis.call('ZSCORE', KEYS[1], unit) or '0')
  if ending > known then redis.call('ZADD', KEYS[1], int(ending), unit) end
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', int(now))
  return 1
end

-- KEYS[1] = the holds' sorted set.  Returns {unit, microseconds left, ...}.
function calls.holds()
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', int(now))
  local held = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
  for i = 2, #held, 2 do held[i] = int(tonumber(held[i]) - now) end
  return held
end

-- robots.txt ------------------------------------------------------------------

-- KEYS = the authority's shared result, its lock, and optionally another key of
-- the same host.  Returns {the result, its lifetime left (ms), the other key's
-- value, 1 if the lock was free and is now held with `token` for `ms`
-- milliseconds}: the lock is taken only when there is no result.
function calls.read_or_lock(token, ms)
  local other = false
  if KEYS[3] then other = redis.call('GET', KEYS[3]) end
  local data = redis.call('GET', KEYS[1])
  local locked = 0
  if not data and redis.call('SET', KEYS[2], token, 'NX', 'PX', ms) then locked = 1 end
  return {data, redis.call('PTTL', KEYS[1]), other, locked}
end

-- KEYS = the authority's shared result, its lock.  Shares `data` for `ms`
-- milliseconds and frees the lock if `token` still holds it.
function calls.publish(data, ms, token)
  redis.call('SET', KEYS[1], data, 'PX', ms)
  if redis.call('GET', KEYS[2]) == token then redis.call('DEL', KEYS[2]) end
  return 1
end

-- KEYS[1] = a lock.  Frees it if `token` still holds it.
function calls.unlock(token)
  if redis.call('GET', KEYS[1]) == token then redis.call('DEL', KEYS[1]) end
  return 1
end

-- The shared queue --------------------------------------------------------------
--
-- KEYS (every queue function's): the units with requests by the time each may
-- next be ready (a sorted set), the count of requests left, the floor each unit in
-- the queue was last known to have (a hash: -1 or absent, not known yet), each
-- unit's owner (a hash), the processes seen lately (a sorted set by when), the
-- count of units given an owner, the last request this process popped (a hash: its
-- pop's number and the request), the count of requests ever pushed (their arrival
-- numbers).
-- Each unit is also in its owner's own set (KEYS[4] .. ':' .. owner) by the same
-- time, so that a pop finds the process's ready units however many others' are
-- ready.  Every queue function's first arguments are `queue`'s.
--
-- A unit's requests are a sorted set (its "list", at `lists` .. unit), popped in
-- Scrapy's order: the highest priority first (the score is minus the priority),
-- first in, first out among equals (each member is the request after its arrival
-- number, 16 hex digits, which Redis orders bytewise among equal scores).

local q = {}

local ARRIVAL = 16  -- the arrival number's width, before the request
local function entry(data, arrival) return string.format('%0' .. ARRIVAL .. 'x', arrival) .. data end
local function request_of(member) return string.sub(member, ARRIVAL + 1) end

-- `lists`: the prefix of the units' request sets; `wakes`: of the processes' wake lists;
-- `process`: this process's id, seen now; `seen_for`: how long a process counts as
-- seen; `ledger`: the prefix of the units' records.
local function queue(lists, wakes, process, seen_for, ledger)
  q = {lists = lists, wakes = wakes, process = process, seen_for = tonumber(seen_for),
    ledger = ledger}
  redis.call('ZADD', KEYS[5], int(now), process)
  redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', '(' .. int(now - q.seen_for))
end

local function owned(process) return KEYS[4] .. ':' .. process end

local function owner(name)  -- its owner, if seen lately
  local process = redis.call('HGET', KEYS[4], name)
  if process and redis.call('ZSCORE', KEYS[5], process) then return process end
  return false
end

local function place(name, time)  -- the unit's ready time, in both sets
  local at = int(time)
  redis.call('ZADD', KEYS[1], at, name)
  local process = redis.call('HGET', KEYS[4], name)
  if process then redis.call('ZADD', owned(process), at, name) end
end

local function give(name, process)
  local before = redis.call('HGET', KEYS[4], name)
  if before then redis.call('ZREM', owned(before), name) end
  redis.call('HSET', KEYS[4], name, process)
  redis.call('ZADD', owned(process), redis.call('ZSCORE', KEYS[1], name), name)
end

-- Nothing of a unit is kept once dropped (a broad crawl's units would fill Redis):
-- pushed again, it is new, its floor not known until a request of it ends.
local function drop(name)
  redis.call('ZREM', KEYS[1], name)
  local process = redis.call('HGET', KEYS[4], name)
  if process then redis.call('ZREM', owned(process), name) end
  redis.call('HDEL', KEYS[4], name)
  redis.call('HDEL', KEYS[3], name)
end

local function wake(process)  -- another process is told to look (one item at most)
  if process == q.process then return end
  local key = q.wakes .. process
  if redis.call('EXISTS', key) == 0 then redis.call('RPUSH', key, '1') end
  redis.call('PEXPIRE', key, math.floor(q.seen_for / 1000))
end

-- The most units a pop looks at for a ready request (bounding the script's time).
local LOOK_AT = 200

local function popped(token) return token and string.sub(token, 1, 4) == 'pop:' end

local function record(name, floor)
  return load(q.ledger .. ':{' .. name .. '}', floor)
end

-- The ends of this process's requests since its last call, from ARGV[first] on,
-- five to an end: the unit, its floor, whether the site saw the request (1: the
-- floor is known) or not (0), how long the unit is held from now (<= 0: not), and
-- the token its pop held it for ('': none).  Each unit's record is let go of and
-- held; a unit still in the queue has its floor noted and is placed when it may
-- start (one with requests queued wakes its owner).  Returns how soon the first of
-- those may start (false: none has requests queued).
local function apply_ends(first)
  local soonest = false
  for i = first, #ARGV, 5 do
    local name, reached = ARGV[i], ARGV[i + 2] == '1'
    local placed = redis.call('ZSCORE', KEYS[1], name)
    if reached and placed then redis.call('HSET', KEYS[3], name, ARGV[i + 1]) end
    local unit = record(name, ARGV[i + 1])
    if ARGV[i + 4] ~= '' then let_go(unit, ARGV[i + 4], reached) end
    local held = tonumber(ARGV[i + 3])
    if held > 0 and now + held > unit.hold then
      unit.hold = now + held
      store(unit)
    end
    if placed then
      local wait = wait_of(unit, math.max(unit.floor, POLL))
      place(name, now + wait)
      if redis.call('ZCARD', q.lists .. name) > 0 then
        if not soonest or wait < soonest then soonest = wait end
        local process = owner(name)
        if process then wake(process) end
      end
    end
  end
  return soonest and int(soonest)
end

-- No more than being seen.
function calls.join(...)
  queue(...)
  return 1
end

-- A queue version 0.1 left: KEYS[1] = its units (named after hosts, their lists
-- prefixed `old`), KEYS[2] = the units, KEYS[3] = the count of requests ever
-- pushed, which 0.1 did not keep.  Unless that count exists, each unit's list
-- becomes its sorted set under `new`, its requests in their order, at priority 0
-- (the lists kept no priority): 0.1's (prefixed `old`, its units renamed) when
-- only KEYS[1] exists, else those prefixed `new`.  Returns how many requests it
-- took over.
function calls.take_over(old, new)
  if redis.call('EXISTS', KEYS[3]) == 1 then return 0 end
  local units = KEYS[2]
  if redis.call('EXISTS', KEYS[1]) == 1 and redis.call('EXISTS', KEYS[2]) == 0 then
    units = KEYS[1]
  else
    old = new
  end
  local arrival = 0
  for _, name in ipairs(redis.call('ZRANGE', units, 0, -1)) do
    local list = old .. name
    if redis.call('TYPE', list).ok == 'list' then
      local set = {}
      for _, data in ipairs(redis.call('LRANGE', list, 0, -1)) do
        arrival = arrival + 1
        table.insert(set, 0)
        table.insert(set, entry(data, arrival))
      end
      redis.call('DEL', list)
      for i = 1, #set, 2000 do
        redis.call('ZADD', new .. name, unpack(set, i, math.min(i + 1999, #set)))
      end
    end
  end
  if units ~= KEYS[2] then redis.call('RENAME', KEYS[1], KEYS[2]) end
  redis.call('SET', KEYS[3], arrival)
  return arrival
end

-- ARGV after `queue`'s: the unit, the encoded request, its priority.  A new unit,
-- or one whose owner is gone, is given to the processes seen lately, sorted, in
-- turn; a unit that had nothing queued wakes its owner.
function calls.push(lists, wakes, process, seen_for, ledger, name, data, priority)
  queue(lists, wakes, process, seen_for, ledger)
  local arrival = redis.call('INCR', KEYS[8])
  redis.call('ZADD', q.lists .. name, -tonumber(priority), entry(data, arrival))
  local queued = redis.call('ZCARD', q.lists .. name)
  redis.call('INCR', KEYS[2])
  redis.call('ZADD', KEYS[1], 'NX', int(now), name)
  local taker = owner(name)
  if not taker then
    local processes = redis.call('ZRANGE', KEYS[5], 0, -1)
    table.sort(processes)
    taker = processes[redis.call('INCR', KEYS[6]) % #processes + 1]
    give(name, taker)
  end
  if queued == 1 then wake(taker) end
  return 1
end

-- ARGV after `queue`'s: the unit.  Takes every request queued for it, whatever its
-- readiness (the process found them refused by a robots.txt it holds: they never
-- reach the site).  The unit keeps its place, its record and its hold.  Returns them.
function calls.take_all(lists, wakes, process, seen_for, ledger, name)
  queue(lists, wakes, process, seen_for, ledger)
  local set = q.lists .. name
  local all = redis.call('ZRANGE', set, 0, -1)
  redis.call('DEL', set)
  redis.call('DECRBY', KEYS[2], #all)
  for i, member in ipairs(all) do all[i] = request_of(member) end
  return all
end

-- ARGV after `queue`'s: the ends (see apply_ends, whose answer this returns).
function calls.ended(...)
  queue(...)
  return apply_ends(7)
end

-- ARGV after `queue`'s: `lease` (0: take no hold, nobody will say the request
-- ended), `grace`, this pop's `number`, the number of the last pop whose request
-- reached the process (`delivered`), then the ends (see apply_ends).
--
-- The last request popped is kept in KEYS[7] with its pop's number: if the process
-- never got it (the reply was lost with the connection), this pop returns it again.
-- The process takes a request of its own ready units, else of a unit ready for
-- `grace` that its owner did not take (busy, slow or gone: a gone owner's unit
-- becomes this process's).  A unit whose record says it may not start yet (another
-- process's request, a hold) is placed when it may.  A unit with a floor has its
-- record held by the pop for `lease`, with the token `pop:process:number`, until the
-- request's end is told; one whose floor is not known yet (its robots.txt, which
-- must not wait for it, may be fetched next) is only placed `lease` away, until that
-- end: one request at a time, the gate acquiring its record.  A unit whose list the pop
-- empties keeps its place (and its hold); a ready unit with an empty list is
-- dropped when a pop meets it, and the pop looks on (up to LOOK_AT units).
--
-- Returns {request or false, the token or '', the floor the unit was held with,
-- microseconds until a unit may be ready for this process or false, the requests
-- left}.
function calls.pop(lists, wakes, process, seen_for, ledger, lease, grace, number, delivered)
  queue(lists, wakes, process, seen_for, ledger)
  apply_ends(11)
  lease, grace = tonumber(lease), tonumber(grace)
  local last = redis.call('HMGET', KEYS[7], 'number', 'data', 'token', 'floor')
  if last[1] and last[1] ~= delivered then
    redis.call('HSET', KEYS[7], 'number', number)
    return {last[2], last[3] or '', last[4] or '0', false, redis.call('GET', KEYS[2])}
  end
  local function take_from(name)
    local floor = tonumber(redis.call('HGET', KEYS[3], name) or '-1')
    local unit = record(name, math.max(floor, 0))
    local wait = wait_of(unit, math.max(unit.floor, POLL))
    if wait > 0 then
      -- A pop's hold ends when its process tells the end (which places the unit);
      -- another's (a robots.txt fetch's) is asked about again after `wait`.
      if now >= unit.hold and now < unit.busy and popped(unit.owner) then wait = unit.busy - now end
      place(name, now + wait)
      return false
    end
    local first = redis.call('ZPOPMIN', q.lists .. name)
    if #first == 0 then
      drop(name)
      return false
    end
    local data = request_of(first[1])
    local token = ''
    if floor > 0 and lease > 0 then
      token = 'pop:' .. q.process .. ':' .. number
      take(unit, lease, token)
    end
    place(name, now + (floor ~= 0 and lease or 0))
    local held_with = int(unit.floor)
    redis.call('HSET', KEYS[7], 'number', number, 'data', data, 'token', token, 'floor', held_with)
    redis.call('PEXPIRE', KEYS[7], 3600000)  -- the process's lifetime at most, if killed
    redis.call('DECR', KEYS[2])
    return {data, token, held_with, false, redis.call('GET', KEYS[2])}
  end
  -- Each unit looked at leaves the ready ones (a request taken, placed later, or
  -- dropped): the ready are looked at until a request is taken, none is left, or
  -- LOOK_AT were (then the process is told to ask again at once).
  local looked = 0
  local function first_ready(key, before, adopt)
    while looked < LOOK_AT do
      local names = redis.call('ZRANGEBYSCORE', key, '-inf', int(before), 'LIMIT', 0, 20)
      if #names == 0 then return false end
      for _, name in ipairs(names) do
        looked = looked + 1
        if adopt and not owner(name) then give(name, q.process) end
        local taken = take_from(name)
        if taken then return taken end
      end
    end
    return false
  end
  local taken = first_ready(owned(q.process), now, false) or first_ready(KEYS[1], now - grace, true)
  if taken then return taken end
  local soonest = false
  if looked >= LOOK_AT then soonest = 0 end
  local function after(key, from, plus)
    local next = redis.call('ZRANGEBYSCORE', key, '(' .. int(from), '+inf', 'WITHSCORES',
      'LIMIT', 0, 1)
    if #next > 0 then
      local wait = tonumber(next[2]) + plus - now
      if not soonest or wait < soonest then soonest = wait end
    end
  end
  after(owned(q.process), now, 0)
  after(KEYS[1], now - grace, grace)
  local count = redis.call('GET', KEYS[2])
  if not soonest then return {false, '', '0', false, count} end
  return {false, '', '0', int(soonest), count}
end

local call = calls[ARGV[1]]
if not call then return redis.error_reply('ledger: no function ' .. tostring(ARGV[1])) end
return call(unpack(ARGV, 2, math.min(#ARGV, 10)))
