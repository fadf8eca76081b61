-- +goose Up
-- One sweep's newest runs, in the exact order GET /internal/runs?sweep= and the status page list
-- them (started_at, then run_id, newest first): an index that yields them sorted lets the planner
-- stop after the rows it returns. Without run_id the planner could prefer walking
-- run_started_at backwards past every other sweep's runs, which for a sweep that has not run in
-- a while reads most of the table. The history is pruned to its retention, so the build, which
-- holds back the runs' history writes meanwhile, is short.
CREATE INDEX run_sweep_started_at_run_id ON sweeprail.run (sweep, started_at DESC, run_id DESC);
DROP INDEX sweeprail.run_sweep_started_at;

-- +goose Down
CREATE INDEX run_sweep_started_at ON sweeprail.run (sweep, started_at DESC);
DROP INDEX sweeprail.run_sweep_started_at_run_id;
