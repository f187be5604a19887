package main

// The SBOM is written by this small code rather than a module: SPDX 2.3 JSON needs a handful of
// fields, and the facts come from the binaries themselves (debug/buildinfo), so what it lists is
// what was compiled in, not what go.mod allows.

import (
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

type spdxDoc struct {
	SPDXVersion       string             `json:"spdxVersion"`
	DataLicense       string             `json:"dataLicense"`
	SPDXID            string             `json:"SPDXID"`
	Name              string             `json:"name"`
	DocumentNamespace string             `json:"documentNamespace"`
	CreationInfo      spdxCreation       `json:"creationInfo"`
	Packages          []spdxPackage      `json:"packages"`
	Relationships     []spdxRelationship `json:"relationships"`
}

type spdxCreation struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type spdxPackage struct {
	Name             string    `json:"name"`
	SPDXID           string    `json:"SPDXID"`
	VersionInfo      string    `json:"versionInfo"`
	DownloadLocation string    `json:"downloadLocation"`
	FilesAnalyzed    bool      `json:"filesAnalyzed"`
	LicenseConcluded string    `json:"licenseConcluded"`
	LicenseDeclared  string    `json:"licenseDeclared"`
	CopyrightText    string    `json:"copyrightText"`
	ExternalRefs     []spdxRef `json:"externalRefs,omitempty"`
}

type spdxRef struct {
	ReferenceCategory string `json:"referenceCategory"`
	ReferenceType     string `json:"referenceType"`
	ReferenceLocator  string `json:"referenceLocator"`
}

type spdxRelationship struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}

const mainModule = "github.com/memifnet/memifnet"

// writeSBOM lists memifnet (the release version), the Go standard library and every module
// compiled into any of the release's binaries (the union over platforms and commands), from
// each binary's embedded build information.
func writeSBOM(c config, b *builds, out string) error {
	mods := map[string]string{} // module path -> version
	var goVersion, vcsTime string
	var files []string
	for _, bins := range b.Image {
		for _, f := range bins {
			files = append(files, f)
		}
	}
	for _, f := range b.Plugin {
		files = append(files, f)
	}
	for _, f := range files {
		bi, err := buildinfo.ReadFile(f)
		if err != nil {
			return fmt.Errorf("%s: build info: %w", f, err)
		}
		if bi.Main.Path != mainModule {
			return fmt.Errorf("%s: main module %q, want %s", f, bi.Main.Path, mainModule)
		}
		goVersion = bi.GoVersion
		for _, s := range bi.Settings {
			if s.Key == "vcs.time" {
				vcsTime = s.Value
			}
		}
		for _, d := range bi.Deps {
			if d.Replace != nil {
				d = d.Replace
			}
			mods[d.Path] = d.Version
		}
	}
	doc := spdxDoc{
		SPDXVersion: "SPDX-2.3", DataLicense: "CC0-1.0", SPDXID: "SPDXRef-DOCUMENT",
		Name:              "memifnet-" + c.Version,
		DocumentNamespace: "https://github.com/memifnet/memifnet/releases/" + c.Version + "/" + sbomFile,
		CreationInfo:      spdxCreation{Created: created(c.Root, vcsTime), Creators: []string{"Tool: memifnet-hack-release-" + c.Version}},
	}
	root := addPackage(&doc, mainModule, c.Version, "https://github.com/memifnet/memifnet")
	doc.Relationships = append(doc.Relationships, spdxRelationship{"SPDXRef-DOCUMENT", "DESCRIBES", root})
	std := addPackage(&doc, "stdlib", goVersion, "https://go.dev/dl/")
	doc.Relationships = append(doc.Relationships, spdxRelationship{root, "DEPENDS_ON", std})
	paths := make([]string, 0, len(mods))
	for p := range mods {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		id := addPackage(&doc, p, mods[p], "NOASSERTION")
		doc.Relationships = append(doc.Relationships, spdxRelationship{root, "DEPENDS_ON", id})
	}
	j, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(out, append(j, '\n'), 0o644)
}

var spdxIDBad = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

// addPackage adds a Go module (purl pkg:golang) and returns its SPDX ID.
func addPackage(doc *spdxDoc, path, version, download string) string {
	id := "SPDXRef-Package-" + spdxIDBad.ReplaceAllString(path, "-")
	purl := "pkg:golang/" + path + "@" + version
	if path == "stdlib" {
		purl = "pkg:golang/stdlib@" + version
	}
	doc.Packages = append(doc.Packages, spdxPackage{
		Name: path, SPDXID: id, VersionInfo: version, DownloadLocation: download,
		LicenseConcluded: "NOASSERTION", LicenseDeclared: "NOASSERTION", CopyrightText: "NOASSERTION",
		ExternalRefs: []spdxRef{{"PACKAGE-MANAGER", "purl", purl}},
	})
	return id
}

// created is the SBOM's creation time, the same for two releases of one commit: the commit
// time the build recorded, else SOURCE_DATE_EPOCH, else HEAD's commit time (go build records no
// VCS information in some checkouts, e.g. git worktrees), else now.
func created(root, vcsTime string) string {
	if t, err := time.Parse(time.RFC3339, vcsTime); err == nil {
		return t.UTC().Format(time.RFC3339)
	}
	if sec, err := strconv.ParseInt(os.Getenv("SOURCE_DATE_EPOCH"), 10, 64); err == nil {
		return time.Unix(sec, 0).UTC().Format(time.RFC3339)
	}
	cmd := exec.Command("git", "log", "-1", "--format=%ct", "HEAD")
	cmd.Dir = root
	if out, err := cmd.Output(); err == nil {
		if sec, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64); err == nil {
			return time.Unix(sec, 0).UTC().Format(time.RFC3339)
		}
	}
	return time.Now().UTC().Format(time.RFC3339)
}
