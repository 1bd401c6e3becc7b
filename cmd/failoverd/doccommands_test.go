package main

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The documents' failoverd commands are parsed against the real command
// tree (newRoot), so a runbook step cannot name a command, a flag or an
// argument count the CLI refuses (issue 30: the runbook's first step,
// `failoverd status GROUP`, failed with `unknown command "orders"`).
//
// Extraction rules (extractCommands):
//
//   - Files: README.md, docs/**/*.md and deploy/**/README.md.
//   - Fenced code blocks (``` or ~~~): every line, with lines ending in a
//     backslash joined to the next (the command is reported at its first
//     line). Inline code spans outside them (`...`, also when the span
//     continues on the next line of its paragraph; `\|` in a table cell is
//     a literal |). Prose without backticks is not read.
//   - A line or span is cut into shell commands at unquoted, free-standing
//     |, ||, && and ; and loses an unquoted # comment. Quotes group words
//     ("disk swap" is one word). A | inside a word is no pipe: it spells
//     alternatives, as in -o table|json|yaml or no-promote|maintenance,
//     and stays one word. An output redirection (> FILE, 2>&1) ends the
//     command's words.
//   - A command is one whose program is failoverd (any path: bin/failoverd,
//     /usr/local/bin/failoverd), after a "$" prompt, NAME=value
//     assignments, sudo, env or time; or the word after a free-standing --
//     (runuser -u failoverd -- failoverd ..., kubectl exec ... -- failoverd
//     ...); or the value of an assignment (ExecStart=/usr/bin/failoverd ...).
//     failoverd's prose ("failoverd never ...") and metric names
//     (failoverd_...) are not commands, nor failoverd followed by a word in
//     parentheses (the history's actor `failoverd (rejoin: ...)`).
//   - Placeholders (GROUP, G, SITE, <group>, F) are ordinary words: any
//     word is a valid argument or string value; <an angle-bracketed
//     placeholder> is one word even with spaces. A duration flag needs a
//     real duration (--for 30m, not --for D). [brackets] mark optional
//     parts: they are dropped and what they hold is checked. A free-standing
//     ... (or …) that is no flag's value means "more arguments elided": the
//     command and flags are checked, not the argument count or the required
//     flags.
//   - An inline span with no positional argument, or one with --help,
//     refers to a command (`failoverd reclone`, `failoverd switchover
//     --force`): the command and its flags are checked, not the argument
//     count or the required flags. Code blocks and spans with arguments are
//     invocations and are checked whole.
//   - An assignment FAILOVERD_<FLAG>=value before the command sets that flag
//     (FAILOVERD_GROUP=orders failoverd sidecar ...), as the CLI reads it.
//
// Checks: the command path exists, every flag exists on that command and
// has a valid value, the positional arguments are as many as the command
// takes, and every flag marked required (markRequired: the command refuses
// to run without it) is given. The API token is no required flag: without
// --token-file a command reads daemon.apiTokenFile of the configuration
// file (-c, /etc/failoverd/failoverd.yaml by default), as on the daemon's
// host.
type docCommand struct {
	file   string
	line   int
	text   string   // the command as quoted, words joined by spaces
	env    []string // NAME=value assignments before it
	args   []string // the words after the program
	inline bool     // from an inline code span
}

func (d docCommand) String() string { return fmt.Sprintf("%s:%d: `%s`", d.file, d.line, d.text) }

// TestDocumentedCommandsParse: every failoverd command quoted in README.md,
// docs/ and the deploy READMEs is one the CLI accepts (extraction rules
// above); a failure names file:line, the command and what the CLI says.
func TestDocumentedCommandsParse(t *testing.T) {
	root := filepath.Join("..", "..")
	files := []string{filepath.Join(root, "README.md")}
	for _, dir := range []string{"docs", "deploy"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() || !strings.HasSuffix(p, ".md") || (dir == "deploy" && d.Name() != "README.md") {
				return nil
			}
			files = append(files, p)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	perFile := map[string]int{}
	total := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		for _, dc := range extractCommands(filepath.ToSlash(rel), string(b)) {
			total++
			perFile[dc.file]++
			if err := checkDocCommand(dc); err != nil {
				t.Errorf("%s: %v", dc, err)
			}
		}
	}
	// The extraction itself must keep finding the runbooks' commands.
	for _, f := range []string{"README.md", "docs/metrics.md", "docs/operations.md", "docs/api.md", "deploy/systemd/README.md"} {
		if perFile[f] < 5 {
			t.Errorf("%s: only %d failoverd command(s) extracted; the extraction is broken", f, perFile[f])
		}
	}
	if total < 100 {
		t.Errorf("only %d failoverd commands extracted from %d files", total, len(files))
	}
}

// checkDocCommand parses dc against a fresh command tree.
func checkDocCommand(dc docCommand) error {
	root := newRoot(io.Discard, io.Discard)
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	var args []string
	for _, a := range dc.args {
		if a = strings.TrimSuffix(strings.TrimPrefix(a, "["), "]"); a != "" {
			args = append(args, a)
		}
	}
	cmd, rest, err := root.Find(args)
	if err != nil {
		return err
	}
	cmd.InitDefaultHelpFlag()
	cmd.InitDefaultVersionFlag()
	if err := cmd.ParseFlags(rest); err != nil {
		return err
	}
	var pos []string
	elided := false
	for _, a := range cmd.Flags().Args() {
		if a == "..." || a == "…" {
			elided = true
			continue
		}
		pos = append(pos, a)
	}
	help, _ := cmd.Flags().GetBool("help")
	if elided || help || (dc.inline && len(pos) == 0) {
		return nil
	}
	if err := cmd.ValidateArgs(pos); err != nil {
		return err
	}
	env := map[string]bool{}
	for _, e := range dc.env {
		env[e[:strings.Index(e, "=")]] = true
	}
	var missing []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if _, req := f.Annotations[requiredAnnotation]; req && !f.Changed &&
			!env["FAILOVERD_"+strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))] {
			missing = append(missing, "--"+f.Name)
		}
	})
	if len(missing) > 0 {
		return fmt.Errorf("%s refuses to run without %s", cmd.CommandPath(), strings.Join(missing, ", "))
	}
	return nil
}

var fence = regexp.MustCompile("^\\s*(```+|~~~+)")

// extractCommands finds the failoverd commands of a Markdown document.
func extractCommands(file, text string) []docCommand {
	var out []docCommand
	lines := strings.Split(text, "\n")
	var para []string // the current paragraph outside code blocks
	paraStart := 0
	flush := func() {
		out = append(out, inlineCommands(file, paraStart, strings.Join(para, "\n"))...)
		para = nil
	}
	open := ""
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if m := fence.FindStringSubmatch(line); m != nil {
			switch {
			case open == "":
				flush()
				open = m[1]
				continue
			case m[1][0] == open[0] && len(m[1]) >= len(open) && strings.TrimSpace(line) == m[1]:
				open = ""
				continue
			}
		}
		if open != "" {
			start := i
			for strings.HasSuffix(line, "\\") && i+1 < len(lines) {
				i++
				line = strings.TrimSuffix(line, "\\") + " " + lines[i]
			}
			for _, words := range shellCommands(line) {
				if dc, ok := asCommand(words); ok {
					dc.file, dc.line = file, start+1
					out = append(out, dc)
				}
			}
			continue
		}
		if strings.TrimSpace(line) == "" {
			flush()
			continue
		}
		if para == nil {
			paraStart = i + 1
		}
		para = append(para, line)
	}
	flush()
	return out
}

// inlineCommands finds the commands in the code spans of a paragraph
// starting at line first.
func inlineCommands(file string, first int, para string) []docCommand {
	var out []docCommand
	for i := 0; i < len(para); {
		if para[i] != '`' {
			i++
			continue
		}
		n := 0
		for i+n < len(para) && para[i+n] == '`' {
			n++
		}
		ticks := para[i : i+n]
		end := -1
		for j := i + n; j < len(para); {
			k := strings.Index(para[j:], ticks)
			if k < 0 {
				break
			}
			k += j
			m := 0
			for k+m < len(para) && para[k+m] == '`' {
				m++
			}
			if m == n {
				end = k
				break
			}
			j = k + m
		}
		if end < 0 {
			i += n
			continue
		}
		span := strings.ReplaceAll(strings.ReplaceAll(para[i+n:end], "\n", " "), `\|`, "|")
		line := first + strings.Count(para[:i], "\n")
		for _, words := range shellCommands(span) {
			if dc, ok := asCommand(words); ok {
				dc.file, dc.line, dc.inline = file, line, true
				out = append(out, dc)
			}
		}
		i = end + n
	}
	return out
}

// shellCommands splits a line into commands (see the rules above).
func shellCommands(line string) [][]string {
	var cmds [][]string
	var words []string
	var word strings.Builder
	inWord, quoted := false, false
	endWord := func() {
		if !inWord {
			return
		}
		w := word.String()
		if !quoted && (w == "|" || w == "||" || w == "&&" || w == ";") {
			cmds = append(cmds, words)
			words = nil
		} else {
			words = append(words, w)
		}
		word.Reset()
		inWord, quoted = false, false
	}
	r := []rune(line)
	for i := 0; i < len(r); i++ {
		switch c := r[i]; {
		case c == ' ' || c == '\t':
			endWord()
		case c == '#' && !inWord:
			i = len(r) // a comment runs to the end of the line
		case c == '<' && !inWord && strings.ContainsRune(string(r[i:]), '>'):
			j := i + strings.IndexRune(string(r[i:]), '>')
			inWord = true
			word.WriteString(string(r[i : j+1]))
			i = j
		case c == '\'' || c == '"':
			inWord, quoted = true, true
			j := i + 1
			for j < len(r) && r[j] != c {
				j++
			}
			word.WriteString(string(r[i+1 : min(j, len(r))]))
			i = j
		case c == '\\' && i+1 < len(r):
			inWord = true
			i++
			word.WriteRune(r[i])
		default:
			inWord = true
			word.WriteRune(c)
		}
	}
	endWord()
	return append(cmds, words)
}

var assignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

func isFailoverd(word string) bool { return path.Base(word) == "failoverd" }

// asCommand recognises a failoverd command in a shell command's words.
func asCommand(words []string) (docCommand, bool) {
	var env []string
	for i, w := range words {
		switch {
		case w == "$" && i == 0, w == "sudo", w == "env", w == "time":
			continue
		case assignment.MatchString(w):
			if v := w[strings.Index(w, "=")+1:]; isFailoverd(v) {
				return newDocCommand(nil, words[i+1:]), true // ExecStart=/usr/bin/failoverd ...
			}
			env = append(env, w)
			continue
		case isFailoverd(w) && (i+1 == len(words) || !strings.HasPrefix(words[i+1], "(")):
			return newDocCommand(env, words[i+1:]), true
		}
		break
	}
	for i, w := range words {
		if w == "--" && i+1 < len(words) && isFailoverd(words[i+1]) {
			return newDocCommand(nil, words[i+2:]), true
		}
	}
	return docCommand{}, false
}

var redirect = regexp.MustCompile(`^[0-9]*>`)

func newDocCommand(env, args []string) docCommand {
	for i, a := range args {
		if redirect.MatchString(a) {
			args = args[:i]
			break
		}
	}
	return docCommand{env: env, args: args, text: strings.Join(append(append(append([]string{}, env...), "failoverd"), args...), " ")}
}

// The extraction rules on a document holding each case they name.
func TestDocCommandExtractionRules(t *testing.T) {
	doc := "failoverd never acts twice; `failoverd_site_reader` is a metric.\n" +
		"Run `failoverd status\norders -o json | jq .readiness` first.\n" +
		"\n" +
		"| a | `failoverd status -g G -o json \\| jq .x` |\n" +
		"\n" +
		"```sh\n" +
		"$ failoverd pause orders --for 30m \\\n" +
		"    --reason \"disk swap\"   # a comment\n" +
		"FAILOVERD_GROUP=orders bin/failoverd sidecar --site a && echo done\n" +
		"runuser -u failoverd -- failoverd validate -c /etc/failoverd/failoverd.yaml\n" +
		"journalctl -u failoverd -f\n" +
		"ExecStart=/usr/local/bin/failoverd run -c /etc/failoverd/failoverd.yaml\n" +
		"failoverd reclone orders b --confirm-discard <first 8 characters> --wait\n" +
		"```\n" +
		"The actor `failoverd (rejoin: x)` and `failoverd status [-g G] [-o table|json|yaml]`.\n"
	var got []string
	for _, dc := range extractCommands("x.md", doc) {
		got = append(got, fmt.Sprintf("%d %v %q env=%q", dc.line, dc.inline, dc.args, dc.env))
	}
	want := []string{
		`2 true ["status" "orders" "-o" "json"] env=[]`,
		`5 true ["status" "-g" "G" "-o" "json"] env=[]`,
		`8 false ["pause" "orders" "--for" "30m" "--reason" "disk swap"] env=[]`,
		`10 false ["sidecar" "--site" "a"] env=["FAILOVERD_GROUP=orders"]`,
		`11 false ["validate" "-c" "/etc/failoverd/failoverd.yaml"] env=[]`,
		`13 false ["run" "-c" "/etc/failoverd/failoverd.yaml"] env=[]`,
		`14 false ["reclone" "orders" "b" "--confirm-discard" "<first 8 characters>" "--wait"] env=[]`,
		`16 true ["status" "[-g" "G]" "[-o" "table|json|yaml]"] env=[]`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("extracted:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// The checks catch each kind of mistake the docs made, and accept what
// the rules allow.
func TestDocCommandCheckCatchesMistakes(t *testing.T) {
	for _, tc := range []struct {
		line string
		want string // "" accepted
	}{
		{"failoverd stauts", `unknown command "stauts"`},
		{"failoverd status orders extra", `takes at most 1 argument, [GROUP]; got 2`},
		{"failoverd status --nope", "unknown flag: --nope"},
		{"failoverd switchover orders", "takes 2 arguments, GROUP SITE; got 1"},
		{"failoverd pause orders --for 1h", "without --reason"},
		{"failoverd hold G SITE maintenance --for D --reason R", `invalid argument "D" for "--for"`},
		{"failoverd reclone orders b --token b", "without --confirm-discard"},
		{"failoverd sidecar --group g --site s", "without --daemon-url"},
		{"failoverd status orders", ""},
		{"failoverd validate /etc/failoverd/failoverd.yaml", ""},
		{"FAILOVERD_GROUP=g FAILOVERD_SITE=s failoverd sidecar --daemon-url http://d:8080", ""},
		{"failoverd sidecar -c CONFIG --group G ...", ""},
		{"failoverd --version", ""},
		{"failoverd completion bash > /etc/bash_completion.d/failoverd", ""},
		{"failoverd hold G S no-promote|maintenance --for 2h --reason R", ""},
	} {
		dcs := extractCommands("t.md", "```\n"+tc.line+"\n```\n")
		if len(dcs) != 1 {
			t.Fatalf("%s: extracted %d commands", tc.line, len(dcs))
		}
		err := checkDocCommand(dcs[0])
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.line, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want an error with %q", tc.line, err, tc.want)
		}
	}
	// Inline, a command without arguments is a reference to it.
	for _, span := range []string{"`failoverd reclone`", "`failoverd switchover --force`", "`failoverd sidecar --help`"} {
		dcs := extractCommands("t.md", "See "+span+".\n")
		if len(dcs) != 1 || checkDocCommand(dcs[0]) != nil {
			t.Errorf("%s: a reference to the command must pass", span)
		}
	}
	if dcs := extractCommands("t.md", "See `failoverd switchover --forse`.\n"); len(dcs) != 1 || checkDocCommand(dcs[0]) == nil {
		t.Errorf("an unknown flag in a reference must fail")
	}
}

// The examples of every command's --help parse too.
func TestHelpExamplesParse(t *testing.T) {
	root := newRoot(io.Discard, io.Discard)
	n := 0
	var walk func(cmd *cobra.Command)
	walk = func(cmd *cobra.Command) {
		for _, dc := range extractCommands(cmd.CommandPath()+" --help", "```\n"+cmd.Example+"\n```\n") {
			n++
			if err := checkDocCommand(dc); err != nil {
				t.Errorf("%s: %v", dc, err)
			}
		}
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
	}
	walk(root)
	if n < 5 {
		t.Errorf("only %d examples found", n)
	}
}
