//go:build !linux

package telemetry

import "errors"

func statfs(path string) (FilesystemStats, error) {
	return FilesystemStats{}, errors.New("statfs is only implemented on Linux")
}
