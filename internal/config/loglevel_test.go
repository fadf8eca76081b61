package config

import (
	"log/slog"
	"testing"
)

func TestLoadAPILogLevel(t *testing.T) {
	for _, tt := range []struct {
		value string
		want  slog.Level
	}{
		{"debug", slog.LevelDebug},
		{"info", slog.LevelInfo},
		{"warn", slog.LevelWarn},
		{"error", slog.LevelError},
		{"DEBUG", slog.LevelDebug},
		{"Warn", slog.LevelWarn},
	} {
		t.Run(tt.value, func(t *testing.T) {
			cfg, err := LoadAPI(apiEnv(map[string]string{"LOG_LEVEL": tt.value}))
			if err != nil {
				t.Fatalf("LoadAPI: %v", err)
			}
			if got := cfg.LogLevel.Level(); got != tt.want {
				t.Errorf("LOG_LEVEL=%s: level %v, want %v", tt.value, got, tt.want)
			}
		})
	}

	t.Run("default is info", func(t *testing.T) {
		cfg, err := LoadAPI(apiEnv(nil))
		if err != nil {
			t.Fatalf("LoadAPI: %v", err)
		}
		if got := cfg.LogLevel.Level(); got != slog.LevelInfo {
			t.Errorf("level %v, want info", got)
		}
	})
}

func TestLoadAPILogLevelMalformed(t *testing.T) {
	for _, tt := range []struct{ value, want string }{
		{"verbose", `LOG_LEVEL=verbose: invalid log level "verbose": want debug, info, warn or error`},
		// slog.Level would take these; an operator would not mean them.
		{"info+2", `LOG_LEVEL=info+2: invalid log level "info+2"`},
		{"-4", `LOG_LEVEL=-4: invalid log level "-4"`},
		{"warning", `LOG_LEVEL=warning: invalid log level "warning"`},
		{" info", `LOG_LEVEL=" info": invalid log level " info"`},
		{"", "LOG_LEVEL is set but empty (unset it for the default info)"},
	} {
		t.Run(tt.value, func(t *testing.T) {
			_, err := LoadAPI(apiEnv(map[string]string{"LOG_LEVEL": tt.value}))
			if err == nil {
				t.Fatal("LoadAPI accepted the configuration")
			}
			wantProblems(t, err, tt.want)
		})
	}
}
