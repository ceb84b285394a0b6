import knexFactory from 'knex';
const k = knexFactory({ client: 'mysql2', connection: 'mysql://botplatform:botplatform@127.0.0.1:3307/botplatform', pool: { min: 0, max: 1 } });
await k.raw(process.argv[2] === 'create' ? 'CREATE DATABASE `bp_bench_ops_6067` CHARACTER SET utf8mb4' : 'DROP DATABASE IF EXISTS `bp_bench_ops_6067`');
await k.destroy();
