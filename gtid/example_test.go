package gtid_test

import (
	"fmt"

	"github.com/failoverd/failoverd/gtid"
)

func Example() {
	primary := gtid.MustParse(gtid.MySQL, "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5012,\n"+
		"4d8b2e3a-0f1c-11ef-8b2a-0242ac120002:1-30")
	replica := gtid.MustParse(gtid.MySQL, "3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5000,"+
		"4d8b2e3a-0f1c-11ef-8b2a-0242ac120002:1-30:31")

	fmt.Println(primary.Compact())
	fmt.Println("replica behind:", primary.Subtract(replica))
	fmt.Println("errant on replica:", replica.Subtract(primary))
	fmt.Println("safe to repoint:", primary.Contains(replica))
	// Output:
	// 3e11fa47…:1-5012 (+1 source)
	// replica behind: 3e11fa47-71ca-11e1-9e33-c80aa9429562:5001-5012
	// errant on replica: 4d8b2e3a-0f1c-11ef-8b2a-0242ac120002:31
	// safe to repoint: false
}

func Example_mariaDB() {
	// @@gtid_binlog_state after a failover from server 1 to server 2 in domain 0.
	newPrimary := gtid.MustParse(gtid.MariaDB, "0-1-50,0-2-100")
	oldPrimary := gtid.MustParse(gtid.MariaDB, "0-1-52") // wrote 51-52 before it died

	fmt.Println("lost on old primary:", oldPrimary.Subtract(newPrimary))
	fmt.Println("comparable:", gtid.Comparable(newPrimary, oldPrimary))
	fmt.Println("count (upper bound):", newPrimary.Count())
	// Output:
	// lost on old primary: 0-1-51..52
	// comparable: false
	// count (upper bound): 150
}
