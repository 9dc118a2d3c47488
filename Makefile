.DEFAULT_GOAL := help

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  %-10s %s\n", $$1, $$2}'

run: ## run orderd with a local PostgreSQL and demo data
	go run ./cmd/orderd dev

test: ## run every test against a real PostgreSQL
	go test ./...

race: ## run every test with the race detector
	go test -race -count=1 ./...

vet: ## go vet
	go vet ./...

lint: vet ## go vet and gofmt
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)

citus-test: ## the Citus suite, on the cluster whose coordinator CITUS_URL names (docs/scaling-out.md)
	@test -n "$$CITUS_URL" || (echo "CITUS_URL must name a Citus coordinator"; exit 1)
	go test -tags citus -count=1 -timeout 30m -run Citus ./...

faults: ## the long crash loop: 40 SIGKILLs under mixed load instead of CI's 5
	ORDERD_LONG_FAULTS=1 go test -count=1 -timeout 60m -run TestCrashesLoseNothing -v ./cmd/orderd

failover: ## the failover test ten times over, each run printing its time without service (docs/operations-failover.md)
	go test -count=10 -timeout 30m -run 'TestFailoverLosesNothing$$' -v ./cmd/orderd

docs: ## regenerate docs/configuration.md and docs/api-reference.md from the code
	go test ./cmd/orderd -run TestConfigurationReferenceIsCurrent -count=1 -update
	go test ./api -run TestAPIReferenceIsCurrent -count=1 -update

client: ## regenerate clients/js from api/openapi.json, rebuild it and run its tests (Node 20+)
	cd clients/js && npm ci && npm run generate && npm run build && npm test

bench: ## every benchmark scenario, with JSON figures and charts; rewrites docs/performance.md and the README's figures
	go run ./cmd/orderd-bench --json bench-results.json --chart bench-charts.html --markdown docs/performance.md --readme README.md all

ci: ## what CI runs
	bash .ci/run

.PHONY: help run test race vet lint citus-test faults failover docs client bench ci
