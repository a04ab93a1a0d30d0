// /init of the arm64 VM of .ci/arm64-check: mounts what Node needs, runs the smoke, prints its exit
// status on the console and powers the machine off. Built static with aarch64-linux-gnu-gcc.
#include <stdio.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void) {
  mkdir("/proc", 0755);
  mkdir("/dev", 0755);
  mkdir("/tmp", 01777);
  mkdir("/sys", 0755);
  mount("proc", "/proc", "proc", 0, NULL);
  mount("devtmpfs", "/dev", "devtmpfs", 0, NULL);
  mount("sysfs", "/sys", "sysfs", 0, NULL);
  mount("tmpfs", "/tmp", "tmpfs", 0, "size=768m");
  pid_t pid = fork();
  if (pid == 0) {
    char* argv[] = {"/node", "/app/vm-smoke.cjs", NULL};
    char* envp[] = {"PATH=/", "HOME=/tmp", "TMPDIR=/tmp", "NODE_PATH=/app/node_modules", NULL};
    execve(argv[0], argv, envp);
    perror("execve /node");
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
  }
  printf("\nPILE-VM-EXIT %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  fflush(stdout);
  sync();
  reboot(RB_POWER_OFF);
  return 0;
}
