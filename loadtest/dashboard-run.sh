#!/usr/bin/env bash
# A load run for the dashboard's picture (docs/images/dashboard.png):
# `wasmkeep serve` with the three examples deployed by a tenant, a real
# Prometheus scraping it, and traffic in phases (the counter's actors, the
# shop's page with its call-many, chat clients on sockets, a burst over the
# pro plan's rate, requests for no page); then ops/render-dashboard.py draws
# ops/grafana/wasmkeep.json from what Prometheus kept.
#
# Needs: target/release/wasmkeep, prometheus and ab (apt-get install
# prometheus apache2-utils), python3 with matplotlib and websockets.
#
#   loadtest/dashboard-run.sh [OUT.png] [MINUTES_PER_PHASE]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-docs/images/dashboard.png}
minutes=${2:-1}
phase=$((minutes * 60))
bin=$PWD/target/release/wasmkeep
work=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
public=127.0.0.1:18080 api=127.0.0.1:18081 metrics=127.0.0.1:19464

"$bin" serve --data "$work/data" --listen $public --api-listen $api --metrics-listen $metrics \
    --signup open --default-plan pro > "$work/serve.log" 2>&1 &
pids+=($!)
cat > "$work/prometheus.yml" <<EOF
global: { scrape_interval: 2s }
scrape_configs:
  - job_name: wasmkeep
    static_configs: [{ targets: ["$metrics"] }]
EOF
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
    --web.listen-address=127.0.0.1:19090 > "$work/prometheus.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do curl -sf "http://$api/v1/openapi.yaml" > /dev/null && break; sleep 0.2; done

export WASMKEEP_API=http://$api WASMKEEP_CONFIG_DIR=$work/login
"$bin" signup acme > /dev/null
for app in counter shop chat; do "$bin" deploy "docs/examples/$app" > /dev/null; done
printf 'a long secret\n' | "$bin" values set chat TOKEN_SECRET > /dev/null
start=$(date +%s)
host() { echo "$1.acme.localhost"; }

echo "phase 1: the counter's actors and the shop's page (${phase}s)"
load=()
for a in a b c d; do
    ab -q -t $phase -n 100000000 -c 4 -H "Host: $(host counter)" "http://$public/actor/counter/$a/" > /dev/null 2>&1 &
    load+=($!)
done
ab -q -t $phase -n 100000000 -c 4 -H "Host: $(host shop)" "http://$public/page/ann" > /dev/null 2>&1 &
load+=($!)
wait "${load[@]}" || true

echo "phase 2: chat clients on sockets, the shop beside them (${phase}s)"
python3 - "$public" "$(host chat)" "$phase" <<'EOF' &
import asyncio, json, sys, time, urllib.error, urllib.request, urllib.parse
import websockets
public, host, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
def login(user):
    req = urllib.request.Request(f"http://{public}/login", data=urllib.parse.urlencode({"user": user}).encode(),
                                 headers={"Host": host})
    for _ in range(50):
        try:
            return json.load(urllib.request.urlopen(req))["token"]
        except urllib.error.HTTPError as e:
            if e.code not in (429, 503):
                raise
            time.sleep(0.2)
    raise SystemExit(f"{user} could not log in")
async def client(i, end):
    token = login(f"user{i}")
    # The URI names the app's host; the connection goes to the node.
    address, port = public.rsplit(":", 1)
    async with websockets.connect(f"ws://{host}:{port}/rooms/room{i % 5}/ws?token={token}",
                                  host=address, port=int(port)) as ws:
        while time.time() < end:
            await ws.send(json.dumps({"text": f"hello from {i}"}))
            try:
                while True:
                    await asyncio.wait_for(ws.recv(), 0.05)
            except asyncio.TimeoutError:
                pass
            await asyncio.sleep(0.2)
async def main():
    end = time.time() + seconds
    await asyncio.gather(*(client(i, end) for i in range(50)))
asyncio.run(main())
EOF
chat=$!
ab -q -t $phase -n 100000000 -c 2 -H "Host: $(host shop)" "http://$public/page/bob" > /dev/null 2>&1 || true
wait $chat

echo "phase 3: many actors, a burst over the plan's rate, pages that are not there (${phase}s)"
ab -q -t $phase -n 100000000 -c 32 -H "Host: $(host counter)" "http://$public/actor/counter/hot/" > /dev/null 2>&1 &
hot=$!
for i in $(seq 400); do curl -s -o /dev/null -H "Host: $(host counter)" "http://$public/actor/counter/n$i/"; done
ab -q -t $((phase / 2)) -n 100000000 -c 4 -H "Host: $(host shop)" "http://$public/nowhere" > /dev/null 2>&1 || true
wait $hot || true
sleep 10
end=$(date +%s)

mkdir -p "$(dirname "$out")"
python3 ops/render-dashboard.py --prometheus http://127.0.0.1:19090 --start "$start" --end "$end" \
    --step 2 --scrape 2 --out "$out" \
    --title "wasmkeep — one node, a load run of loadtest/dashboard-run.sh ($(date -u -d @"$start" +%F))"
