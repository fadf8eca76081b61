package config

import "testing"

func TestLoadAPIBatchWALCompression(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  map[string]string
		want WALCompression
	}{
		{"unset: the server's", nil, ""},
		{"empty: the server's", map[string]string{"BATCH_WAL_COMPRESSION": ""}, ""},
		{"lz4", map[string]string{"BATCH_WAL_COMPRESSION": "lz4"}, "lz4"},
		{"zstd", map[string]string{"BATCH_WAL_COMPRESSION": "zstd"}, "zstd"},
		{"pglz", map[string]string{"BATCH_WAL_COMPRESSION": "pglz"}, "pglz"},
		{"on", map[string]string{"BATCH_WAL_COMPRESSION": "on"}, "on"},
		{"off", map[string]string{"BATCH_WAL_COMPRESSION": "off"}, "off"},
		{"in any case, written lower", map[string]string{"BATCH_WAL_COMPRESSION": "LZ4"}, "lz4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := LoadAPI(apiEnv(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			if cfg.BatchWALCompression != tc.want {
				t.Errorf("BatchWALCompression %q, want %q", cfg.BatchWALCompression, tc.want)
			}
		})
	}
}

func TestLoadAPIBatchWALCompressionMalformed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ value, want string }{
		{"gzip", `BATCH_WAL_COMPRESSION=gzip: invalid wal_compression "gzip": want off, on, pglz, lz4 or zstd`},
		// PostgreSQL takes these for a boolean; the rail names the method or off.
		{"true", `BATCH_WAL_COMPRESSION=true: invalid wal_compression "true"`},
		{"1", `BATCH_WAL_COMPRESSION=1: invalid wal_compression "1"`},
		{" lz4", `BATCH_WAL_COMPRESSION=" lz4": invalid wal_compression " lz4"`},
		// The value is written into each batch's SET LOCAL: nothing but a keyword may reach it.
		{"lz4; DROP TABLE t", `BATCH_WAL_COMPRESSION="lz4; DROP TABLE t": invalid wal_compression "lz4; DROP TABLE t"`},
	} {
		t.Run(tc.value, func(t *testing.T) {
			t.Parallel()
			_, err := LoadAPI(apiEnv(map[string]string{"BATCH_WAL_COMPRESSION": tc.value}))
			if err == nil {
				t.Fatal("LoadAPI accepted the configuration")
			}
			wantProblems(t, err, tc.want)
		})
	}
}
