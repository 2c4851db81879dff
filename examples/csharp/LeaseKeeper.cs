// Keeps a lease while its work runs: renews it every third of the lease, and
// cancels the work when the lease is Lost, or when the local deadline (the
// send time of the last call that granted or renewed it, plus the lease)
// passes without a renewal. The deadline runs on the local monotonic clock
// from when each call was *sent*, so neither the server's clock nor the
// time the reply took can lengthen it.
using System;
using System.Diagnostics;
using System.Threading;
using System.Threading.Tasks;

namespace Fencepost.Example
{
    public sealed class LeaseKeeper
    {
        readonly FenceCalls calls;
        readonly string key;
        readonly Guid owner;
        readonly long generation;
        readonly int leaseSeconds;
        readonly Stopwatch clock;
        readonly Func<Task> beforeRenewal;
        readonly CancellationTokenSource work = new CancellationTokenSource();
        readonly CancellationTokenSource stop = new CancellationTokenSource();
        readonly TaskCompletionSource<bool> renewed = new TaskCompletionSource<bool>();
        TimeSpan deadline;

        // acquireSentAt: clock.Elapsed just before the Acquire that granted
        // the lease was sent. beforeRenewal lets a test stall the keeper.
        public LeaseKeeper(FenceCalls calls, string key, Guid owner, long generation, int leaseSeconds,
                           Stopwatch clock, TimeSpan acquireSentAt, Func<Task> beforeRenewal)
        {
            this.calls = calls;
            this.key = key;
            this.owner = owner;
            this.generation = generation;
            this.leaseSeconds = leaseSeconds;
            this.clock = clock;
            this.beforeRenewal = beforeRenewal ?? (() => Task.FromResult(true));
            deadline = acquireSentAt + TimeSpan.FromSeconds(leaseSeconds);
            Loop = Task.Run(Run);
        }

        // Cancelled when the lease is lost: the work must stop and publish nothing.
        public CancellationToken Work { get { return work.Token; } }

        // Why the work was cancelled, once it was.
        public string LostBecause { get; private set; }

        // Completes at the first renewal.
        public Task<bool> FirstRenewal { get { return renewed.Task; } }

        public Task Loop { get; private set; }

        // Stops renewing (before the publish that ends the lease).
        public Task Stop()
        {
            stop.Cancel();
            return Loop;
        }

        async Task Run()
        {
            var interval = TimeSpan.FromSeconds(leaseSeconds / 3.0);
            while (!stop.IsCancellationRequested)
            {
                var left = deadline - clock.Elapsed;
                var pause = left < interval ? left : interval;
                try
                {
                    await Task.Delay(pause > TimeSpan.Zero ? pause : TimeSpan.Zero, stop.Token);
                }
                catch (OperationCanceledException)
                {
                    return;
                }
                await beforeRenewal();
                if (stop.IsCancellationRequested)
                    return;
                var sentAt = clock.Elapsed;
                try
                {
                    // A renewal that would outlast the lease is no use.
                    var timeout = Math.Max(1, leaseSeconds / 3);
                    if (calls.Renew(key, owner, generation, leaseSeconds, timeout) == "Renewed")
                    {
                        deadline = sentAt + TimeSpan.FromSeconds(leaseSeconds);
                        renewed.TrySetResult(true);
                        continue;
                    }
                    // Lost: someone else holds it, it was released or fenced,
                    // or it ran out; an expired lease is never revived.
                    Lose("Lost");
                    return;
                }
                catch (Exception e) when (FenceErrors.IsRetryable(e))
                {
                    // A renewal is idempotent: try again while the lease lasts.
                }
                catch (Exception e)
                {
                    // Nothing says the lease is still held: stop the work.
                    Lose("renewal failed: " + e.Message);
                    return;
                }
                if (clock.Elapsed >= deadline)
                {
                    Lose("no renewal before the local deadline");
                    return;
                }
            }
        }

        void Lose(string why)
        {
            LostBecause = why;
            renewed.TrySetResult(false);
            work.Cancel();
        }
    }
}
