package config

import "testing"

func TestLoadAPIBatchFlushAfter(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  map[string]string
		want Size
	}{
		{"unset: the server's", nil, 0},
		{"empty: the server's", map[string]string{"BATCH_FLUSH_AFTER": ""}, 0},
		{"KiB", map[string]string{"BATCH_FLUSH_AFTER": "256KiB"}, 256 << 10},
		{"one page", map[string]string{"BATCH_FLUSH_AFTER": "8KiB"}, 8 << 10},
		{"PostgreSQL's largest", map[string]string{"BATCH_FLUSH_AFTER": "2MiB"}, 2 << 20},
		{"bytes", map[string]string{"BATCH_FLUSH_AFTER": "131072"}, 128 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := LoadAPI(apiEnv(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			if cfg.BatchFlushAfter != tc.want {
				t.Errorf("BatchFlushAfter %d, want %d", cfg.BatchFlushAfter, tc.want)
			}
		})
	}
}

func TestLoadAPIBatchFlushAfterMalformed(t *testing.T) {
	t.Parallel()
	const rangeMsg = "must be a whole number of 8KiB pages within 8KiB..2MiB, PostgreSQL's range for backend_flush_after"
	for _, tc := range []struct{ value, want string }{
		// kB is PostgreSQL's binary unit and most tools' decimal one: a size is no guess.
		{"256kB", `BATCH_FLUSH_AFTER=256kB: invalid size "256kB": want whole bytes, or with KiB, MiB or GiB`},
		{"-8KiB", `BATCH_FLUSH_AFTER=-8KiB: invalid size "-8KiB"`},
		{"256KiB; DROP TABLE t", `BATCH_FLUSH_AFTER="256KiB; DROP TABLE t": invalid size`},
		{"0", "BATCH_FLUSH_AFTER=0 " + rangeMsg},
		{"4KiB", "BATCH_FLUSH_AFTER=4KiB " + rangeMsg},
		{"12KiB", "BATCH_FLUSH_AFTER=12KiB " + rangeMsg},
		{"4MiB", "BATCH_FLUSH_AFTER=4MiB " + rangeMsg},
	} {
		t.Run(tc.value, func(t *testing.T) {
			t.Parallel()
			_, err := LoadAPI(apiEnv(map[string]string{"BATCH_FLUSH_AFTER": tc.value}))
			if err == nil {
				t.Fatal("LoadAPI accepted the configuration")
			}
			wantProblems(t, err, tc.want)
		})
	}
}
