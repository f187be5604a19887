package main

// The Helm chart step: separate on purpose, because charts/memifnet is written on its own
// branch. It runs only when the chart exists, and packages it the way `helm package` lays a
// chart out (a gzipped tarball of the chart directory under its name). Still to wire once the
// chart lands: its version/appVersion from the release and the image digest in its values.

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// chartDir is the Helm chart's place in the module.
const chartDir = "charts/memifnet"

// packageChart writes memifnet-<version>.tgz (without the leading v, as Helm names charts)
// when charts/memifnet exists; without it the release simply has no chart.
func packageChart(c config, dir string) error {
	src := filepath.Join(c.Root, chartDir)
	if _, err := os.Stat(filepath.Join(src, "Chart.yaml")); errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	return packageChartDir(src, filepath.Join(dir, "memifnet-"+c.Version[1:]+".tgz"))
}

// packageChartDir tars the chart's files under "memifnet/", sorted, reproducibly. The chart's
// own Chart.yaml is taken as is: setting version/appVersion from the release is the chart
// branch's job to wire (hook: rewrite Chart.yaml here before packaging).
func packageChartDir(src, out string) error {
	var names []string
	files := map[string]string{}
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		n := "memifnet/" + filepath.ToSlash(rel)
		names = append(names, n)
		files[n] = p
		return nil
	})
	if err != nil {
		return err
	}
	return tarGz(out, names, files, "")
}
