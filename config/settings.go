package config

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/goccy/go-yaml/ast"
)

// DuckDBSettings are the DuckDB settings gapless.yaml may set for a
// duckdb:// warehouse, under warehouse_settings (dbt-duckdb's `settings`,
// SQLMesh's `connector_config`): they bound what the embedded warehouse
// takes from the machine. The zero value leaves DuckDB's defaults (memory
// limit 80% of the machine's memory, one thread per core).
//
//	warehouse: duckdb://warehouse.duckdb
//	warehouse_settings:
//	  memory_limit: 2GB      # DuckDB's memory_limit: a size with its unit
//	  threads: 2             # DuckDB's threads: at least 1
type DuckDBSettings struct {
	// MemoryLimit is DuckDB's memory_limit as written ("2GB", "512MiB");
	// "" for DuckDB's default.
	MemoryLimit string
	// Threads is DuckDB's threads; 0 for DuckDB's default.
	Threads int
}

// IsZero reports whether s sets nothing.
func (s DuckDBSettings) IsZero() bool { return s == DuckDBSettings{} }

// fileWarehouseSettings mirrors warehouse_settings: its yaml tags are the
// settings gapless passes to DuckDB, and the only ones it accepts.
type fileWarehouseSettings struct {
	MemoryLimit *string `yaml:"memory_limit"`
	Threads     *int    `yaml:"threads"`
}

// ErrBadSetting is wrapped by the error of a warehouse setting gapless
// refuses.
var ErrBadSetting = errors.New("bad warehouse setting")

// memoryLimitRE is a size as DuckDB reads memory_limit: a number, then a
// unit of bytes (B, KB, MB, GB, TB, their KiB… forms, or the words).
var memoryLimitRE = regexp.MustCompile(`(?i)^[0-9]+(\.[0-9]+)?\s*(b|bytes?|kb|kib|kilobytes?|mb|mib|megabytes?|gb|gib|gigabytes?|tb|tib|terabytes?)$`)

// ParseMemoryLimit checks a memory_limit value: a number and its unit,
// such as 2GB, 512MB or 1.5GiB. It returns it trimmed.
func ParseMemoryLimit(s string) (string, error) {
	t := strings.TrimSpace(s)
	if !memoryLimitRE.MatchString(t) {
		return "", fmt.Errorf("%w: memory_limit %q is not a size: want a number and a unit, such as 2GB, 512MB or 1.5GiB", ErrBadSetting, s)
	}
	return t, nil
}

// warehouseSettings reads warehouse_settings for the warehouse conn.
func (l *loader) warehouseSettings(raw *fileWarehouseSettings, conn Conn) (DuckDBSettings, error) {
	const key = "warehouse_settings"
	var out DuckDBSettings
	if raw == nil {
		return out, nil
	}
	if conn.Driver != DriverDuckDB {
		e := l.ErrAt(key, l.KeyPos[key], nil, "%s: applies to a duckdb:// warehouse only; the warehouse is %s, whose settings are the server's", key, conn.Driver)
		e.Err = ErrBadSetting
		return out, e
	}
	if raw.MemoryLimit != nil {
		k := key + ".memory_limit"
		if node := l.ValNode[k]; node != nil && node.Type() != ast.StringType {
			e := l.ValueErr(k, nil, "%s: want a size with its unit, such as 2GB, got %s", k, node.String())
			e.Err = ErrBadSetting
			return out, e
		}
		v, err := ParseMemoryLimit(*raw.MemoryLimit)
		if err != nil {
			return out, l.ValueErr(k, err, "%s", k)
		}
		out.MemoryLimit = v
	}
	if raw.Threads != nil {
		k := key + ".threads"
		if *raw.Threads < 1 {
			e := l.ValueErr(k, nil, "%s: want at least 1, got %d", k, *raw.Threads)
			e.Err = ErrBadSetting
			return out, e
		}
		out.Threads = *raw.Threads
	}
	return out, nil
}
