package mysqlctl

import (
	"testing"

	"github.com/failoverd/failoverd/gtid"
	"github.com/failoverd/failoverd/test/testenv"
)

// mysqlFactory starts MySQL 9.7 servers with test/testenv (the private root
// scripts/deps builds; semisync and clone plugins loaded, read-only and
// super_read_only at boot).
func mysqlFactory() serverFactory {
	return serverFactory{
		engine:  testenv.MySQL,
		flavor:  gtid.MySQL,
		replTLS: true, // caching_sha2_password; mysqld generates its certificates at startup
		clone:   true,
		start: func(t *testing.T, name string, extra ...string) *realServer {
			return newRealServer(testenv.StartMySQL(t, testenv.ServerOptions{Name: name, ExtraArgs: extra}))
		},
		parallelApplier: []string{"--replica-parallel-workers=4"}, // the default since 8.0.27, explicit here
		raw: rawSQL{
			executed:       "SELECT @@GLOBAL.gtid_executed",
			replicaStatus:  "SHOW REPLICA STATUS",
			ioRunning:      "Replica_IO_Running",
			sqlRunning:     "Replica_SQL_Running",
			sourcePort:     "Source_Port",
			retrieved:      "Retrieved_Gtid_Set",
			stopSQLThread:  "STOP REPLICA SQL_THREAD",
			startSQLThread: "START REPLICA SQL_THREAD",
			// read_only alone does not stop the admin (SUPER, CONNECTION_ADMIN in ALL).
			adminWriteOn:  []string{"SET GLOBAL super_read_only = OFF"},
			adminWriteOff: []string{"SET GLOBAL super_read_only = ON"},
		},
	}
}

// TestRealMySQL runs the real-server suite against MySQL 9.7 on 127.0.0.1.
func TestRealMySQL(t *testing.T) { runSuite(t, mysqlFactory()) }
