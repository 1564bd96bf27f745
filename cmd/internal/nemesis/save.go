package nemesis

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// SaveHistory writes h to path as JSON, replacing the file whole.
func SaveHistory(path string, h *History) error {
	b, err := json.MarshalIndent(h, "", " ")
	if err != nil {
		return fmt.Errorf("nemesis: encode history: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("nemesis: save history: %w", err)
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("nemesis: save history %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("nemesis: save history %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("nemesis: save history: %w", err)
	}
	return nil
}

// LoadHistory reads a history SaveHistory wrote.
func LoadHistory(path string) (*History, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("nemesis: load history: %w", err)
	}
	var h History
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("nemesis: load history %s: %w", path, err)
	}
	return &h, nil
}
