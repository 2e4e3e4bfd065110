import { compile } from '../http';
import { clusterRoutes } from './cluster';
import { qemuRoutes } from './qemu';
import { storageRoutes } from './storage';
import { taskRoutes } from './tasks';

/** Every path the sandbox's REST API serves. */
export const ROUTES = compile([...clusterRoutes, ...qemuRoutes, ...storageRoutes, ...taskRoutes]);
