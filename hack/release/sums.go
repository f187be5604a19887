package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// sumsFile lists the SHA-256 of every other file of the release (`sha256sum -c SHA256SUMS`).
const sumsFile = "SHA256SUMS"

func writeSums(dir string) error {
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == sumsFile {
			return err
		}
		sum, err := fileSHA256(p)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s  %s\n", sum, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, sumsFile), []byte(b.String()), 0o644)
}

// fileSHA256 is the file's SHA-256 in hex.
func fileSHA256(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
