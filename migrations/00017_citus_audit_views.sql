-- Every audit view was rewritten here to run on Citus as well as on one
-- PostgreSQL. The views are now defined once each in views/, applied after
-- the migrations (views.go), which states the rule; this migration keeps its
-- version, empty, so that databases that applied it stay in step.

-- +goose Up

-- +goose Down
