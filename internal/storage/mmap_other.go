//go:build !unix

package storage

func mmapFile(f File, size int) (b []byte, ok bool, err error) { return nil, false, nil }

func mmapFileRW(f File, size int) (b []byte, ok bool, err error) { return nil, false, nil }

func munmap(b []byte) error { return nil }
