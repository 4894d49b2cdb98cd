#!/usr/bin/env node
// The `easel` command (package.json "bin"; `npx easel --help` in the repository): loads tsx's
// ESM hooks into this process and runs the TypeScript CLI in lib/cli/main.ts. No build step.
import { register } from 'tsx/esm/api';

register();
const { main } = await import(new URL('../lib/cli/main.ts', import.meta.url).href);
process.exitCode = await main(process.argv.slice(2));
