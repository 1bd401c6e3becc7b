package failoverd

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// image is the project's container image.
const image = "ghcr.io/failoverd/failoverd"

// semver matches a release number as VERSION holds it (no leading "v").
var semver = regexp.MustCompile(`^(\d+)\.(\d+)\.(\d+)(-[0-9A-Za-z.-]+)?$`)

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestVersionFileIsARelease: VERSION holds one semantic version and the
// binary embeds exactly it (a stray "v", space or second line would reach
// `failoverd version`, the image tag and the chart).
func TestVersionFileIsARelease(t *testing.T) {
	raw := read(t, "VERSION")
	if !semver.MatchString(Version) || raw != Version+"\n" {
		t.Fatalf("VERSION is %q: want one line MAJOR.MINOR.PATCH[-PRE], e.g. 0.9.0", raw)
	}
}

// releaseFiles are the text files that name the image: everything under
// deploy/ (manifests, the chart, READMEs; not Go sources), the docs and
// the README.
func releaseFiles(t *testing.T) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir("deploy", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && !strings.HasSuffix(p, ".go") {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	docs, _ := filepath.Glob(filepath.Join("docs", "*.md"))
	return append(append(out, docs...), "README.md")
}

var (
	// imageRef is the project's image with a tag or digest.
	imageRef = regexp.MustCompile(regexp.QuoteMeta(image) + `([:@](?:\$\(cat VERSION\)|[^\s"'\x60]+))`)
	// latest is any image tagged latest, or a chart value saying so.
	latest = regexp.MustCompile(`(?i)(:latest\b|\btag:\s*["']?latest\b|appVersion:\s*["']?latest\b)`)
	// versionExpr are the tags that read the VERSION file (shell, make).
	versionExpr = map[string]bool{":$(cat VERSION)": true, ":$(VERSION)": true}
	// imageLine is a YAML image: field.
	imageLine = regexp.MustCompile(`(?m)^\s*-?\s*image:\s*["']?([^\s"']+)`)
)

// TestDeployUsesTheVersionTag: every manifest, the chart and the docs name
// the image at the VERSION tag, nothing runs :latest, and every image a
// manifest names carries a tag or digest. Guards a deployment that pulls
// whatever was pushed last, or a release whose manifests run another
// version than the one they were tested with.
func TestDeployUsesTheVersionTag(t *testing.T) {
	for _, f := range releaseFiles(t) {
		text := read(t, f)
		for _, m := range imageRef.FindAllStringSubmatch(text, -1) {
			if m[1] != ":"+Version && !versionExpr[m[1]] {
				t.Errorf("%s names %s%s: use the VERSION tag %s:%s", f, image, m[1], image, Version)
			}
		}
		for _, m := range latest.FindAllString(text, -1) {
			t.Errorf("%s says %q: pin a version (the project's image: %s)", f, m, Version)
		}
		if strings.HasSuffix(f, ".yaml") || strings.HasSuffix(f, ".yml") {
			for _, m := range imageLine.FindAllStringSubmatch(text, -1) {
				ref := m[1]
				if strings.Contains(ref, "{{") {
					continue // the chart's template: checked by rendering it
				}
				if !strings.Contains(ref[strings.LastIndex(ref, "/")+1:], ":") && !strings.Contains(ref, "@") {
					t.Errorf("%s: image %s has no tag or digest", f, ref)
				}
			}
		}
	}
}

// TestChartVersionIsVERSION: the chart's version and appVersion are the
// VERSION file's, and its image tag defaults to appVersion. Guards a chart
// that installs another release than the one it is shipped with.
func TestChartVersionIsVERSION(t *testing.T) {
	var chart struct {
		Version    string `yaml:"version"`
		AppVersion string `yaml:"appVersion"`
	}
	if err := yaml.Unmarshal([]byte(read(t, "deploy/helm/failoverd/Chart.yaml")), &chart); err != nil {
		t.Fatal(err)
	}
	if chart.AppVersion != Version || chart.Version != Version {
		t.Errorf("Chart.yaml version %q appVersion %q, VERSION %q: set both to VERSION", chart.Version, chart.AppVersion, Version)
	}
	var values struct {
		Image struct {
			Repository string `yaml:"repository"`
			Tag        string `yaml:"tag"`
		} `yaml:"image"`
	}
	if err := yaml.Unmarshal([]byte(read(t, "deploy/helm/failoverd/values.yaml")), &values); err != nil {
		t.Fatal(err)
	}
	if values.Image.Repository != image || values.Image.Tag != "" {
		t.Errorf("values.yaml image %s:%q: want repository %s and an empty tag (appVersion)", values.Image.Repository, values.Image.Tag, image)
	}
}

// TestDockerfilePinsBaseImagesAndLabels: every base image is pinned by
// digest (a rebuild cannot silently take another toolchain or runtime),
// and the final image carries the OCI labels naming its version, commit,
// source and license.
func TestDockerfilePinsBaseImagesAndLabels(t *testing.T) {
	text := read(t, "Dockerfile")
	from := regexp.MustCompile(`(?m)^FROM\s+(\S+)`).FindAllStringSubmatchIndex(text, -1)
	if len(from) == 0 {
		t.Fatal("Dockerfile: no FROM")
	}
	pinned := regexp.MustCompile(`^[^@\s]+:[^@\s]+@sha256:[0-9a-f]{64}$`)
	for _, m := range from {
		if ref := text[m[2]:m[3]]; !pinned.MatchString(ref) {
			t.Errorf("Dockerfile: FROM %s: pin it as image:tag@sha256:<digest> (crane digest image:tag)", ref)
		}
	}
	final := text[from[len(from)-1][0]:]
	// The labels' ARGs must be declared in the final stage, or they are empty.
	for _, arg := range []string{"ARG VERSION", "ARG COMMIT"} {
		if !strings.Contains(final, arg) {
			t.Errorf("Dockerfile: the final stage lacks %q: its label would be empty", arg)
		}
	}
	for label, value := range map[string]string{
		"org.opencontainers.image.version":  `"${VERSION}"`,
		"org.opencontainers.image.revision": `"${COMMIT}"`,
		"org.opencontainers.image.source":   `"https://github.com/failoverd/failoverd"`,
		"org.opencontainers.image.licenses": `"Apache-2.0"`,
		"org.opencontainers.image.title":    `"failoverd"`,
	} {
		if !strings.Contains(final, label+"="+value) {
			t.Errorf("Dockerfile: the final stage lacks LABEL %s=%s", label, value)
		}
	}
	// The version label is the release the binary embeds: the build refuses another.
	if !strings.Contains(text, `test "${VERSION}" = "$(cat VERSION)"`) {
		t.Error("Dockerfile: no check that the VERSION build argument equals the VERSION file")
	}
	if lic := read(t, "LICENSE"); !strings.Contains(lic, "Apache License") || !strings.Contains(lic, "Version 2.0, January 2004") {
		t.Error("LICENSE is not the Apache License 2.0 the image's label names")
	}
}

// TestChangelogHasTheVersion: CHANGELOG.md has an entry (heading and link)
// for the release VERSION names.
func TestChangelogHasTheVersion(t *testing.T) {
	text := read(t, "CHANGELOG.md")
	heading := regexp.MustCompile(`(?m)^## \[` + regexp.QuoteMeta(Version) + `\] - \d{4}-\d{2}-\d{2}$`)
	if !heading.MatchString(text) {
		t.Errorf("CHANGELOG.md has no heading \"## [%s] - YYYY-MM-DD\"", Version)
	}
	if !strings.Contains(text, "\n["+Version+"]: ") {
		t.Errorf("CHANGELOG.md has no link [%s]: ...", Version)
	}
}

// versionNumbers returns MAJOR, MINOR, PATCH of a release number.
func versionNumbers(t *testing.T, v string) [3]int {
	t.Helper()
	m := semver.FindStringSubmatch(v)
	if m == nil {
		t.Fatalf("%q is not a version", v)
	}
	var out [3]int
	for i := range out {
		out[i], _ = strconv.Atoi(m[i+1])
	}
	return out
}

func versionLess(a, b [3]int) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// TestDocsRemovalsAreAhead: a removal the docs announce ("removed in X")
// names a release after VERSION. Guards docs that still promise a removal
// the release they describe has made (or skipped), so the deprecation
// notes stay true as VERSION moves.
func TestDocsRemovalsAreAhead(t *testing.T) {
	removed := regexp.MustCompile(`(?i)removed in (\d+\.\d+\.\d+)`)
	cur := versionNumbers(t, Version)
	docs, _ := filepath.Glob(filepath.Join("docs", "*.md"))
	for _, f := range append(docs, "README.md") {
		for _, m := range removed.FindAllStringSubmatch(read(t, f), -1) {
			if !versionLess(cur, versionNumbers(t, m[1])) {
				t.Errorf("%s: %q, but this is %s: remove the feature (and the note) or move the date", f, m[0], Version)
			}
		}
	}
}
