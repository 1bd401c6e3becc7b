// Command failoverd keeps a MySQL/MariaDB failover group available and
// consistent. See README.md and docs/design.md.
package main

import (
	"os"
)

func main() {
	os.Exit(execute(os.Args[1:], os.Stdout, os.Stderr))
}
