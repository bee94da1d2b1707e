package readme

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// link matches a Markdown link's target: [text](target).
var link = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// headingLink matches a link in a heading, whose text alone makes the
// anchor.
var headingLink = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)

// codeSpan matches inline code, whose text is no link.
var codeSpan = regexp.MustCompile("`[^`\n]*`")

// prose returns the lines of a Markdown file with its fenced blocks and
// inline code blanked out, so that line i of the file is element i-1.
func prose(markdown string) []string {
	lines := strings.Split(markdown, "\n")
	fenced := false
	for i, line := range lines {
		switch {
		case strings.HasPrefix(strings.TrimSpace(line), "```"):
			fenced = !fenced
			lines[i] = ""
		case fenced:
			lines[i] = ""
		default:
			lines[i] = codeSpan.ReplaceAllString(line, "``")
		}
	}
	return lines
}

// anchors returns the anchors GitHub gives the headings of a Markdown file:
// the heading's text in lower case, without punctuation and inline code's
// backticks, spaces turned into hyphens, and "-1", "-2"… after repeats.
func anchors(markdown string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(markdown, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		text, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " ")
		if fenced || !strings.HasPrefix(line, "#") || !ok {
			continue
		}
		text = headingLink.ReplaceAllString(text, "$1")
		var slug strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(text)) {
			switch {
			case r == ' ':
				slug.WriteByte('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
				slug.WriteRune(r)
			}
		}
		a := slug.String()
		if n := seen[a]; n > 0 {
			seen[a]++
			a += "-" + strconv.Itoa(n)
		} else {
			seen[a] = 1
		}
		out[a] = true
	}
	return out
}

// TestLinks requires every relative link of README.md and docs/*.md to name
// a file of the repository, and every #anchor one of the target's headings.
func TestLinks(t *testing.T) {
	files, err := Markdown("../..")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, file := range files {
		markdown, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range prose(string(markdown)) {
			for _, m := range link.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				path, anchor, _ := strings.Cut(target, "#")
				dest := file
				if path != "" {
					dest = filepath.Join(filepath.Dir(file), filepath.FromSlash(path))
				}
				checked++
				where := displayName("../..", file)
				data, err := os.ReadFile(dest)
				if err != nil {
					if _, statErr := os.Stat(dest); statErr != nil {
						t.Errorf("%s:%d: the link %q names no file of the repository", where, i+1, target)
						continue
					}
					if anchor != "" {
						t.Errorf("%s:%d: the link %q has an anchor, but its target is a directory", where, i+1, target)
					}
					continue
				}
				if anchor != "" && strings.HasSuffix(dest, ".md") && !anchors(string(data))[anchor] {
					t.Errorf("%s:%d: the link %q names no heading of %s", where, i+1, target, displayName("../..", dest))
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("README.md and docs/*.md hold no relative link: the test checks nothing")
	}
}

// TestGuidesListed requires README.md to link every guide of docs/.
func TestGuidesListed(t *testing.T) {
	files, err := Markdown("../..")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, guide := range files[1:] {
		name := "docs/" + filepath.Base(guide)
		if !strings.Contains(string(readme), "]("+name+")") {
			t.Errorf("README.md does not link the guide %s", name)
		}
	}
}

// TestAnchors computes GitHub's anchors for headings with punctuation,
// inline code, links and repeats.
func TestAnchors(t *testing.T) {
	md := "# Fallback and recovery\n## The fleet's share\n### One walk: package `policy`\n```\n# not a heading\n```\n## Why `Retry-After` is the lease's TTL\n## Keys\n## Keys\n## See [the guide](x.md)\n"
	got := anchors(md)
	for _, want := range []string{"fallback-and-recovery", "the-fleets-share", "one-walk-package-policy", "why-retry-after-is-the-leases-ttl", "keys", "keys-1", "see-the-guide"} {
		if !got[want] {
			t.Errorf("no anchor %q in %v", want, got)
		}
	}
	if got["not-a-heading"] {
		t.Error("a line of a fenced block was taken for a heading")
	}
}
