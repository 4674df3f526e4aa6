-- The load of the PUT-path side-by-side benchmark (bench/putpath): every request is a
-- position report of a member, with that member's own token, for a random media at a random
-- position, on a keep-alive connection. The driver writes requests.lua, one formatted request
-- per member in random order, and passes its path as the script's argument.
--
-- The requests are formatted beforehand and sent in turn: building a request in Lua for every
-- call made wrk, not the server, the bottleneck, and going through the members in turn spreads
-- the load evenly over them, as players do (no member nears the rate limit). The second thread
-- starts halfway through the list.
local requests, next_request

local thread_number = 0
function setup(thread)
  thread:set("thread_number", thread_number)
  thread_number = thread_number + 1
end

function init(args)
  requests = dofile(args[1])
  next_request = (thread_number * math.floor(#requests / 2)) % #requests
end

function request()
  next_request = next_request % #requests + 1
  return requests[next_request]
end

-- One line the driver parses: the counts of the whole run.
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('WRK {"requests": %d, "duration_us": %d, "connect": %d, "read": %d, "write": %d, "status": %d, "timeout": %d}\n',
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout))
end
