//go:build linux

package telemetry

import "syscall"

func statfs(path string) (FilesystemStats, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return FilesystemStats{}, err
	}
	bs := uint64(st.Bsize)
	return FilesystemStats{
		Mount:      path,
		SizeBytes:  st.Blocks * bs,
		FreeBytes:  st.Bfree * bs,
		AvailBytes: st.Bavail * bs,
	}, nil
}
