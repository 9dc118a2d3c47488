#!/usr/bin/env bash
# The tour of orderd against `orderd dev`'s demo merchant, one curl per step:
# capacity 1, three orders (one accepted, two in line), an idempotent replay,
# a queued order cancelled, a capacity raise that admits from the line, and
# completions that leave the merchant idle again, so the tour can run any
# number of times.
#
#   go run ./cmd/orderd dev                        # in one terminal
#   source .orderd/env && scripts/tour.sh          # in another, same directory
#
# Needs bash and curl. Each step prints its curl command (copy it to try your
# own variations) and the answer; the script stops at the first answer that
# is not what the step expects.
set -euo pipefail

for v in ORDERD ADMIN MERCHANT ALICE BOB CAROL MERCHANT_ID TEA; do
  if [ -z "${!v:-}" ]; then
    echo "tour: \$$v is not set: run 'orderd dev', then 'source .orderd/env' in this shell" >&2
    exit 2
  fi
done

# Idempotency-Keys unique to this run: a second run places new orders
# instead of replaying the first run's.
run="$(date +%s)-$$-$RANDOM"
bold="" plain=""
if [ -t 1 ]; then bold=$'\e[1m' plain=$'\e[0m'; fi

STATUS="" BODY="" HEADERS=""
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

step() { printf '\n%s# %s%s\n' "$bold" "$*" "$plain"; }

# call METHOD PATH TOKEN-VARIABLE [BODY [HEADER...]]: prints the command, then
# the status and body; sets STATUS, BODY and HEADERS.
call() {
  local method=$1 path=$2 tokenvar=$3 body=${4:-}
  shift 4 2>/dev/null || shift $#
  local args=(-s -X "$method" "$ORDERD$path" -H "Authorization: Bearer ${!tokenvar}")
  local shown="curl -s -X $method \$ORDERD$path -H \"Authorization: Bearer \$$tokenvar\""
  if [ -n "$body" ]; then
    args+=(-H 'Content-Type: application/json' -d "$body")
    shown+=" -H 'Content-Type: application/json' -d '$body'"
  fi
  for h in "$@"; do
    args+=(-H "$h")
    shown+=" -H '$h'"
  done
  echo "\$ $shown"
  STATUS=$(curl "${args[@]}" -D "$tmp/headers" -o "$tmp/body" -w '%{http_code}')
  BODY=$(cat "$tmp/body")
  HEADERS=$(cat "$tmp/headers")
  echo "$STATUS $BODY"
}

fail() { echo "tour: $*" >&2; exit 1; }

# field NAME: the first "NAME": value of the last answer (orders, merchants
# and products name their own fields before any nested ones).
field() {
  grep -o "\"$1\":\(\"[^\"]*\"\|[^,}]*\)" <<<"$BODY" | head -n 1 | sed "s/^\"$1\"://; s/^\"//; s/\"\$//"
}

expect() {
  local status=$1
  shift
  [ "$STATUS" = "$status" ] || fail "expected $status, got $STATUS"
  local pair
  for pair in "$@"; do
    local name=${pair%%=*} want=${pair#*=} got
    got=$(field "$name")
    [ "$got" = "$want" ] || fail "expected $name $want, got ${got:-nothing}"
  done
}

order() { # order ITEMS-JSON [payment_ref]
  local pay=""
  if [ -n "${2:-}" ]; then pay=",\"payment_ref\":\"$2\""; fi
  printf '{"merchant_id":"%s","items":%s%s}' "$MERCHANT_ID" "$1" "$pay"
}

step "The demo merchant and its live load (nothing may be waiting or in preparation)"
call GET "/v1/merchants/$MERCHANT_ID" MERCHANT
expect 200
[ "$(field active)" = 0 ] && [ "$(field queued)" = 0 ] ||
  fail "the demo merchant is busy (active $(field active), queued $(field queued)): run 'orderd dev --reset' for a clean demo"

step "The admin sets its capacity to one order at a time"
call PATCH "/v1/merchants/$MERCHANT_ID" ADMIN '{"capacity":1}'
expect 200 capacity=1

step "Alice orders two teas and pays as she orders (payment_ref): accepted, the unit is hers"
alice_body=$(order "[{\"product_id\":\"$TEA\",\"quantity\":2}]" "tour-$run-alice")
call POST /v1/orders ALICE "$alice_body" "Idempotency-Key: tour-$run-alice"
expect 201 status=accepted
alice_order=$(field id)

step "Her app retries the same request with the same Idempotency-Key: the same order again, nothing new"
call POST /v1/orders ALICE "$alice_body" "Idempotency-Key: tour-$run-alice"
expect 200 id="$alice_order" status=accepted
grep -qi '^Idempotent-Replayed: true' <<<"$HEADERS" || fail "expected Idempotent-Replayed: true"
echo "(Idempotent-Replayed: true)"

step "Bob orders without paying: awaiting_payment, with a payment_deadline"
call POST /v1/orders BOB "$(order "[{\"product_id\":\"$TEA\",\"quantity\":1}]")" "Idempotency-Key: tour-$run-bob"
expect 201 status=awaiting_payment
bob_order=$(field id)

step "Bob pays: the unit is taken, so he queues, first in line"
call POST "/v1/orders/$bob_order/pay" BOB "{\"payment_ref\":\"tour-$run-bob\"}"
expect 200 status=queued queue_position=1

step "Carol orders and pays at once: second in line, with an estimated wait"
call POST /v1/orders CAROL "$(order "[{\"product_id\":\"$TEA\",\"quantity\":1}]" "tour-$run-carol")" "Idempotency-Key: tour-$run-carol"
expect 201 status=queued queue_position=2
carol_order=$(field id)

step "The merchant's line, in queue order"
call GET "/v1/merchants/$MERCHANT_ID/orders?status=queued" MERCHANT
expect 200
[ "$(grep -o '"queue_position":[0-9]*' <<<"$BODY" | tr '\n' ' ')" = '"queue_position":1 "queue_position":2 ' ] || fail "expected two orders in line"

step "Carol changes her mind while queued: cancelled, her stock released"
call POST "/v1/orders/$carol_order/cancel" CAROL '{"reason":"changed my mind"}'
expect 200 status=cancelled

step "The admin raises capacity to 2: Bob is admitted in the same transaction"
call PATCH "/v1/merchants/$MERCHANT_ID" ADMIN '{"capacity":2}'
expect 200 capacity=2
call GET "/v1/orders/$bob_order" BOB
expect 200 status=accepted

step "The merchant completes both orders: the kitchen is idle again"
call POST "/v1/orders/$alice_order/complete" MERCHANT
expect 200 status=completed
call POST "/v1/orders/$bob_order/complete" MERCHANT
expect 200 status=completed

step "Bob's order, event by event"
call GET "/v1/orders/$bob_order/events" BOB
expect 200
[ "$(grep -o '"type":"order\.[a-z_]*"' <<<"$BODY" | tr '\n' ' ')" = '"type":"order.placed" "type":"order.paid" "type":"order.queued" "type":"order.accepted" "type":"order.completed" ' ] ||
  fail "expected placed, paid, queued, accepted, completed"

step "Back to capacity 1, as the tour found it"
call PATCH "/v1/merchants/$MERCHANT_ID" ADMIN '{"capacity":1}'
expect 200 capacity=1

printf '\n%sThe tour is over: every step answered as expected.%s\n' "$bold" "$plain"
