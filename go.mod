module arenactl

go 1.24
