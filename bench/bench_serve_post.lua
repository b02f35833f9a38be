-- wrk script for bench/bench_serve.sh: POST the body in $POSY_BENCH_BODY to
-- the path given on the wrk command line, keep-alive.
wrk.method = "POST"
wrk.body = os.getenv("POSY_BENCH_BODY")
wrk.headers["Content-Type"] = "application/json"

function response(status, headers, body)
  if status ~= 200 then
    io.stderr:write("non-200 response: " .. status .. " " .. body .. "\n")
  end
end
