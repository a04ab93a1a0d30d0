/* eslint-disable @typescript-eslint/no-unused-vars -- values declared only for their types */
// Compiled by test/cache-types.test.ts with tsc (not run): a table opened with a zod schema
// gives its inferred type back from get, entries and getOrPut, with no casts.
import { openCache } from '../../src';
import { z } from 'zod';

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
function assertType<T extends true>(): T | void {}

const cache = openCache();
const users = cache.table('users', { schema: z.object({ id: z.number(), name: z.string(), tags: z.array(z.string()).optional() }) });
const u = users.get('u:1');
assertType<Equal<typeof u, { id: number; name: string; tags?: string[] | undefined } | undefined>>();
const name: string | undefined = u?.name;
// @ts-expect-error a field the schema does not have
void u?.email;
// @ts-expect-error a value that does not match the schema
users.put('u:2', { id: 'two', name: 'Bo' });
for (const [, v] of users.entries()) assertType<Equal<typeof v, { id: number; name: string; tags?: string[] | undefined }>>();
const made = users.getOrPut('u:3', () => ({ id: 3, name: 'Cy' }));
assertType<Equal<typeof made.id, number>>();
const untyped = cache.table('raw');
assertType<Equal<ReturnType<typeof untyped.get>, unknown>>();
void name;
