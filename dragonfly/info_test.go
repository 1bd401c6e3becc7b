package dragonfly

import "testing"

func TestParseReplication(t *testing.T) {
	tests := []struct {
		name    string
		info    string
		want    replication
		wantErr bool
	}{
		{
			name: "redis master",
			info: "# Replication\r\nrole:master\r\nconnected_slaves:1\r\nslave0:ip=127.0.0.1,port=6380,state=online,offset=42,lag=0\r\nmaster_replid:abc\r\nmaster_repl_offset:42\r\n",
			want: replication{Role: roleMaster, MasterOffset: 42, HasMasterOffset: true},
		},
		{
			name: "redis replica",
			info: "# Replication\r\nrole:slave\r\nmaster_host:127.0.0.1\r\nmaster_port:6379\r\nmaster_link_status:up\r\nmaster_sync_in_progress:0\r\nslave_repl_offset:40\r\nmaster_repl_offset:40\r\n",
			want: replication{Role: roleReplica, MasterHost: "127.0.0.1", MasterPort: "6379", LinkUp: true,
				ReplicaOffset: 40, HasReplicaOffset: true, MasterOffset: 40, HasMasterOffset: true},
		},
		{
			name: "redis replica in full sync",
			info: "role:slave\nmaster_host:h\nmaster_port:1\nmaster_link_status:down\nmaster_sync_in_progress:1\n",
			want: replication{Role: roleReplica, MasterHost: "h", MasterPort: "1", SyncInProgress: true},
		},
		{
			name: "dragonfly replica in stable sync",
			info: "# Replication\r\nrole:replica\r\nmaster_host:cache-a\r\nmaster_port:6379\r\nmaster_link_status:up\r\nmaster_last_io_seconds_ago:0\r\nmaster_sync_in_progress:0\r\nslave_repl_offset:1234\r\n",
			want: replication{Role: roleReplica, MasterHost: "cache-a", MasterPort: "6379", LinkUp: true,
				ReplicaOffset: 1234, HasReplicaOffset: true},
		},
		{name: "unknown role", info: "role:sentinel\n", wantErr: true},
		{name: "no role", info: "# Replication\r\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseReplication(tt.info)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestEngineCaughtUp(t *testing.T) {
	master := replication{Role: roleMaster, MasterOffset: 100, HasMasterOffset: true}
	tests := []struct {
		name    string
		eng     engine
		replica replication
		want    bool
	}{
		{"redis at the master offset", redisEngine{}, replication{Role: roleReplica, LinkUp: true, ReplicaOffset: 100, HasReplicaOffset: true}, true},
		{"redis past it (master kept writing)", redisEngine{}, replication{Role: roleReplica, LinkUp: true, ReplicaOffset: 150, HasReplicaOffset: true}, true},
		{"redis behind", redisEngine{}, replication{Role: roleReplica, LinkUp: true, ReplicaOffset: 99, HasReplicaOffset: true}, false},
		{"redis link down", redisEngine{}, replication{Role: roleReplica, ReplicaOffset: 100, HasReplicaOffset: true}, false},
		{"dragonfly stable sync", dragonflyEngine{}, replication{Role: roleReplica, LinkUp: true, ReplicaOffset: 7, HasReplicaOffset: true}, true},
		{"dragonfly full sync", dragonflyEngine{}, replication{Role: roleReplica, SyncInProgress: true}, false},
		{"dragonfly link up, no offset yet", dragonflyEngine{}, replication{Role: roleReplica, LinkUp: true}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.eng.caughtUp(tt.replica, master); got != tt.want {
				t.Errorf("caughtUp = %v, want %v", got, tt.want)
			}
		})
	}
}
