package main

import (
	"archive/tar"
	"compress/gzip"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// Archives are reproducible: entries in lexical order, owner root, the Unix epoch as time, modes
// 0755 (directories, executables) or 0644; gzip without a name or time.

// tarDir writes dir's tree (directories and regular files) as an uncompressed tarball.
func tarDir(dir, out string) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return tw.WriteHeader(header(filepath.ToSlash(rel)+"/", tar.TypeDir, 0o755, 0))
		}
		return addFile(tw, p, filepath.ToSlash(rel), 0o644)
	})
	return closeAll(err, tw, f)
}

// tarGz writes files (name in the archive -> source; mode 0755 for the entry named exec,
// 0644 for the others) as a gzipped tarball, in the order given.
func tarGz(out string, names []string, files map[string]string, exec string) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	zw := gzip.NewWriter(f)
	tw := tar.NewWriter(zw)
	for _, n := range names {
		mode := int64(0o644)
		if n == exec {
			mode = 0o755
		}
		if err = addFile(tw, files[n], n, mode); err != nil {
			break
		}
	}
	return closeAll(err, tw, zw, f)
}

func header(name string, typ byte, mode, size int64) *tar.Header {
	return &tar.Header{Name: name, Typeflag: typ, Mode: mode, Size: size, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
}

func addFile(tw *tar.Writer, src, name string, mode int64) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(header(name, tar.TypeReg, mode, st.Size())); err != nil {
		return err
	}
	_, err = io.Copy(tw, f)
	return err
}

// closeAll closes each in order and returns the first error (err first).
func closeAll(err error, cs ...io.Closer) error {
	for _, c := range cs {
		if cerr := c.Close(); err == nil {
			err = cerr
		}
	}
	return err
}
