package obs

import (
	"fmt"
	"io"
	"log/slog"
)

// Log formats of NewLogger.
const (
	LogText = "text" // slog's logfmt-style key=value lines
	LogJSON = "json" // one JSON object per line
)

// NewLogger returns a logger writing to w in format (LogText or LogJSON)
// at level (debug, info, warn or error, as slog.Level parses them, with
// offsets such as "info+2" allowed). An unknown format or level returns
// ErrBadConfig.
func NewLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("%w: log level %q: want debug, info, warn or error", ErrBadConfig, level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case LogText:
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case LogJSON:
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("%w: log format %q: want %s or %s", ErrBadConfig, format, LogText, LogJSON)
}
