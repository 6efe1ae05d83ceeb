// Command modproxy serves one module version from a local git clone as a file-based Go
// module proxy (GOPROXY=file://DIR), for when the public proxy refuses that version.
//
// It zips the tagged subdirectory exactly as the go command does (golang.org/x/mod/zip,
// the same code path `go mod download` uses for a VCS origin), so the go command still
// checks the result against the hashes committed in go.sum: a clone whose tag holds
// different content fails the build with a checksum mismatch instead of building a
// different oracle. It never edits go.sum and never talks to the network.
//
//	modproxy -repo DIR -module github.com/siderolabs/talos/pkg/machinery \
//	    -version v1.14.0-rc.1 -tag pkg/machinery/v1.14.0-rc.1 -subdir pkg/machinery -out PROXY
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/sumdb/dirhash"
	"golang.org/x/mod/zip"
)

func main() {
	repo := flag.String("repo", "", "git clone holding the tag (a work tree, or a bare repository)")
	mod := flag.String("module", "", "module path")
	version := flag.String("version", "", "module version")
	tag := flag.String("tag", "", "git revision to zip (default: <subdir>/<version>)")
	subdir := flag.String("subdir", "", "module directory inside the repository")
	out := flag.String("out", "", "directory to write the file proxy into")
	flag.Parse()

	if *repo == "" || *mod == "" || *version == "" || *out == "" {
		fail(fmt.Errorf("-repo, -module, -version and -out are required"))
	}

	if *tag == "" {
		*tag = strings.TrimPrefix(*subdir+"/"+*version, "/")
	}

	if err := run(*repo, *mod, *version, *tag, *subdir, *out); err != nil {
		fail(err)
	}
}

func run(repo, mod, version, tag, subdir, out string) error {
	escaped, err := module.EscapePath(mod)
	if err != nil {
		return err
	}

	dir := filepath.Join(out, escaped, "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}

	// x/mod/zip wants a work tree; a bare mirror gets a throwaway shared clone.
	workTree := repo
	if _, err := os.Stat(filepath.Join(repo, ".git")); err != nil {
		tmp, err := os.MkdirTemp("", "modproxy-*")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)

		workTree = filepath.Join(tmp, "repo")

		clone := exec.Command("git", "clone", "--quiet", "--shared", "--no-checkout", repo, workTree)
		clone.Stderr = os.Stderr

		if err := clone.Run(); err != nil {
			return fmt.Errorf("git clone --shared %s: %w", repo, err)
		}
	}

	zipPath := filepath.Join(dir, version+".zip")

	f, err := os.Create(zipPath)
	if err != nil {
		return err
	}

	if err := zip.CreateFromVCS(f, module.Version{Path: mod, Version: version}, workTree, tag, subdir); err != nil {
		f.Close()

		return fmt.Errorf("zip %s@%s from %s (%s): %w", mod, version, repo, tag, err)
	}

	if err := f.Close(); err != nil {
		return err
	}

	goMod, err := exec.Command("git", "-C", workTree, "show", tag+":"+filepath.ToSlash(filepath.Join(subdir, "go.mod"))).Output()
	if err != nil {
		return fmt.Errorf("read go.mod at %s: %w", tag, err)
	}

	if err := os.WriteFile(filepath.Join(dir, version+".mod"), goMod, 0o644); err != nil {
		return err
	}

	stamp, err := exec.Command("git", "-C", workTree, "log", "-1", "--format=%cI", tag).Output()
	if err != nil {
		return fmt.Errorf("read the commit time of %s: %w", tag, err)
	}

	when, err := time.Parse(time.RFC3339, strings.TrimSpace(string(stamp)))
	if err != nil {
		return err
	}

	infoJSON, err := json.Marshal(map[string]string{"Version": version, "Time": when.UTC().Format(time.RFC3339)})
	if err != nil {
		return err
	}

	if err := os.WriteFile(filepath.Join(dir, version+".info"), infoJSON, 0o644); err != nil {
		return err
	}

	if err := os.WriteFile(filepath.Join(dir, "list"), []byte(version+"\n"), 0o644); err != nil {
		return err
	}

	sum, err := dirhash.HashZip(zipPath, dirhash.Hash1)
	if err != nil {
		return err
	}

	fmt.Printf("%s %s %s\n", mod, version, sum)

	return nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "modproxy:", err)
	os.Exit(1)
}
