import net from 'node:net';

/** VMID = last IP octet: VM 120 with gateway 192.168.0.1 is 192.168.0.120. */
export function vmIp(gateway: string, vmid: number): string {
  return `${gateway.split('.').slice(0, 3).join('.')}.${vmid}`;
}

/** Whether something accepts a TCP connection at `ip:port` within half a second. */
export function portAnswers(ip: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: ip, port, timeout: 500 });
    const done = (answer: boolean) => {
      socket.destroy();
      resolve(answer);
    };
    socket.once('connect', () => done(true));
    socket.once('timeout', () => done(false));
    socket.once('error', () => done(false));
  });
}
