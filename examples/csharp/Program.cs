// A fenced report from C#: provision, acquire, a renew loop that cancels the
// work on Lost, publish-and-release, a replay of a publish whose reply was
// lost, and the handover: a worker that stalled past its lease is refused
// everywhere once a successor took over. docs/callers.md explains each step.
//
//   mcs -out:fenced-report.exe -r:System.Data.dll examples/csharp/*.cs
//   mono fenced-report.exe "Server=tcp:db,1433;Database=app;User ID=svc;Password=..." report:daily
//
// The login needs only the fence_service role. Each line printed starts with
// the step's name; the CI run asserts them.
using System;
using System.Diagnostics;
using System.Threading;
using System.Threading.Tasks;

namespace Fencepost.Example
{
    public static class Program
    {
        static readonly Stopwatch Clock = Stopwatch.StartNew();

        public static int Main(string[] args)
        {
            if (args.Length != 2)
            {
                Console.Error.WriteLine("usage: fenced-report.exe CONNECTION-STRING KEY-PREFIX");
                return 2;
            }
            try
            {
                Run(new FenceCalls(args[0]), args[1]).GetAwaiter().GetResult();
                return 0;
            }
            catch (Exception e)
            {
                Console.Error.WriteLine("failed: " + e);
                return 1;
            }
        }

        static async Task Run(FenceCalls fence, string prefix)
        {
            var version = fence.ContractVersion();
            if (version[0] != 1 || version[1] < 5)
                throw new InvalidOperationException("this program needs contract 1.5 or a later 1.x");
            Say("contract", version[0] + "." + version[1]);

            await Cycle(fence, prefix + ":cycle");
            UnknownPublish(fence, prefix + ":replay");
            await Handover(fence, prefix + ":handover");
            Refusals(fence);
            Say("done", "");
        }

        // Acquire, work under a renewing keeper, publish-and-release: two
        // round trips when the work is short, a renewal every third of the
        // lease when it is not.
        static async Task Cycle(FenceCalls fence, string key)
        {
            // Provision once per key, before (never inside) a transaction.
            Say("cycle", "provision " + fence.Provision(key));
            var owner = Guid.NewGuid(); // fresh for every acquisition
            const int lease = 3;
            var sentAt = Clock.Elapsed;
            var acquired = fence.Acquire(key, owner, lease);
            if (acquired.Outcome != "Acquired")
                throw new InvalidOperationException("acquire answered " + acquired.Outcome);
            var generation = acquired.Generation.Value;
            Say("cycle", "acquired generation " + generation + ", lease until " + acquired.LeaseUntilUtc.Value.Kind);

            var keeper = new LeaseKeeper(fence, key, owner, generation, lease, Clock, sentAt, null);
            string report = await Work(keeper);
            await keeper.Stop();
            if (report == null)
            {
                Say("cycle", "lease lost (" + keeper.LostBecause + "): nothing published");
                fence.Release(key, owner, generation);
                return;
            }
            // One operation id per publish, kept until the publish is settled.
            var operationId = Guid.NewGuid();
            var published = fence.Publish(key, owner, generation, operationId, report, true);
            Say("cycle", "publish-and-release " + published);
            if (published == "StaleSource")
                fence.Release(key, owner, generation); // StaleSource keeps the lease
        }

        // The work: it waits for a renewal to show the keeper at work, and
        // gives up when the keeper cancels it.
        static async Task<string> Work(LeaseKeeper keeper)
        {
            try
            {
                var renewedInTime = await keeper.FirstRenewal;
                keeper.Work.ThrowIfCancellationRequested();
                Say("cycle", renewedInTime ? "renewed while working" : "not renewed");
                return "revenue report";
            }
            catch (OperationCanceledException)
            {
                return null;
            }
        }

        // A publish whose reply never came (a timeout, a cut connection) may
        // or may not have committed. The same publish again, same lease,
        // operation id and payload, answers AlreadyPublished if it had.
        static void UnknownPublish(FenceCalls fence, string key)
        {
            fence.Provision(key);
            var owner = Guid.NewGuid();
            var acquired = fence.Acquire(key, owner, 30);
            var generation = acquired.Generation.Value;
            var operationId = Guid.NewGuid();
            const string payload = "report built once";

            // Unknown only says it has not committed *yet*: while the first
            // send may still arrive it is not a final answer.
            Say("replay", "outcome before any publish " + fence.GetOutcome(operationId));
            fence.Publish(key, owner, generation, operationId, payload, true);
            Say("replay", "the first publish's reply is treated as lost");
            Say("replay", "replay " + fence.Publish(key, owner, generation, operationId, payload, true));
            Say("replay", "outcome " + fence.GetOutcome(operationId));
        }

        // Worker A stalls past its lease (its keeper too, as in a GC pause or
        // a frozen VM); B takes over and publishes; A wakes up.
        static async Task Handover(FenceCalls fence, string key)
        {
            fence.Provision(key);
            const int lease = 2;
            var ownerA = Guid.NewGuid();
            var sentAt = Clock.Elapsed;
            var a = fence.Acquire(key, ownerA, lease);
            var generationA = a.Generation.Value;
            Say("handover", "A acquired generation " + generationA);
            var stalled = new TaskCompletionSource<bool>();
            var keeperA = new LeaseKeeper(fence, key, ownerA, generationA, lease, Clock, sentAt, () => stalled.Task);

            // Wait until the server's own clock says A's lease ran out.
            while (true)
            {
                var seen = fence.Inspect(key);
                if (!seen.IsHeld)
                    break;
                var left = seen.LeaseUntilUtc.Value - seen.ServerUtc;
                await Task.Delay(left > TimeSpan.Zero ? left : TimeSpan.FromMilliseconds(50));
            }
            Say("handover", "A's lease ran out on the server's clock");

            var ownerB = Guid.NewGuid();
            var b = fence.Acquire(key, ownerB, 30);
            var generationB = b.Generation.Value;
            Say("handover", "B " + b.Outcome + " generation " + generationB);
            var operationB = Guid.NewGuid();
            Say("handover", "B publish-and-release " + fence.Publish(key, ownerB, generationB, operationB, "report by B", true));

            // A wakes up: its keeper's next renewal answers Lost and cancels
            // its work.
            stalled.SetResult(true);
            await keeperA.Loop;
            Say("handover", "A keeper: " + keeperA.LostBecause + ", work cancelled " + keeperA.Work.IsCancellationRequested);
            // A worker that ignored the cancellation is still refused.
            Say("handover", "A publish " + fence.Publish(key, ownerA, generationA, Guid.NewGuid(), "report by A", true));
            Say("handover", "A release " + fence.Release(key, ownerA, generationA));
            Say("handover", "A renew " + fence.Renew(key, ownerA, generationA, lease, 30));
            Say("handover", "B replay " + fence.Publish(key, ownerB, generationB, operationB, "report by B", true));
            var read = fence.ReadPublication(key);
            Say("handover", "read generation " + read.PublishedGeneration + " payload " + read.Payload);
        }

        // Bad input is an error naming the parameter, and changes nothing.
        static void Refusals(FenceCalls fence)
        {
            Refused("over-long key", () => fence.Provision(new string('k', 300)));
            Refused("nil owner", () => fence.Acquire("report:daily", Guid.Empty, 30));
        }

        static void Refused(string what, Action call)
        {
            try
            {
                call();
                Say("refused", what + " was accepted");
            }
            catch (Exception e) when (FenceErrors.IsRefusal(e))
            {
                Say("refused", what + " " + FenceErrors.Number(e) + ", retryable " + FenceErrors.IsRetryable(e));
            }
        }

        static void Say(string step, string what)
        {
            Console.WriteLine(step + ": " + what);
        }
    }
}
