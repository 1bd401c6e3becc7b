package mysqlctl

import (
	"testing"

	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/test/testenv"
)

// mariadbFactory starts MariaDB 10.11 servers with test/testenv.
func mariadbFactory() serverFactory {
	return serverFactory{
		engine: testenv.MariaDB,
		flavor: gtid.MariaDB,
		start: func(t *testing.T, name string, extra ...string) *realServer {
			return newRealServer(testenv.StartMariaDB(t, testenv.ServerOptions{Name: name, ExtraArgs: extra}))
		},
		parallelApplier: []string{"--slave-parallel-threads=4"},
		raw: rawSQL{
			executed:       "SELECT @@GLOBAL.gtid_binlog_state",
			replicaStatus:  "SHOW SLAVE STATUS",
			ioRunning:      "Slave_IO_Running",
			sqlRunning:     "Slave_SQL_Running",
			sourcePort:     "Master_Port",
			retrieved:      "Gtid_IO_Pos",
			stopSQLThread:  "STOP SLAVE SQL_THREAD",
			startSQLThread: "START SLAVE SQL_THREAD",
			// READ_ONLY ADMIN (in ALL) lets the admin write through read_only.
		},
	}
}

// TestRealMariaDB runs the real-server suite against MariaDB 10.11 on 127.0.0.1.
func TestRealMariaDB(t *testing.T) { runSuite(t, mariadbFactory()) }
