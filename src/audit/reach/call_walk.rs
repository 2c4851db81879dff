//! The calls lending modules make, walked once per audit. A procedure's
//! text is read once for the procedures it runs (by name, or by a synonym
//! for one, "Synonyms (Database Engine)"), and what a procedure's own
//! statements reach under a set of contexts is weighed once; each walk from
//! a lending module then visits a (procedure, context) pair at most once,
//! so procedures that call one another end, at any depth ("Nesting Stored
//! Procedures": up to 32 levels).

use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use super::super::catalog::{Object, ObjectKind};
use super::super::module_text::{contains_words, normalized};
use super::super::rules::Context;
use super::as_caller::has_caller_region;
use super::call_check::runs;
use super::code::chain_owner;
use super::lent_targets::own;
use super::lent_write::{Lender, Made, body, lenders};
use super::node::Goal;
use super::right::Right;
use super::runners::callable;
use super::written_through::Through;
use crate::tsql::code_only;

/// One call on a path: its caller's EXEC of `name` and why it passes.
#[derive(Clone)]
pub(super) struct Step {
    pub(super) name: String,
    pub(super) call: String,
    pub(super) evidence: String,
    pub(super) cut: String,
    /// The key of the context the call is made in, and whether the callee
    /// keeps it (countersigned).
    pub(super) key: Option<String>,
    pub(super) keeps: bool,
}

/// A procedure a text runs, by a synonym for it or not.
#[derive(Clone, Copy)]
struct Callee<'a> {
    proc: usize,
    via: Option<&'a Object>,
}

/// A walk in progress: the callees of the procedure it is in, run with
/// `lender` from a module owned by `owner`.
struct Frame<'a> {
    owner: Option<String>,
    lender: usize,
    callees: Rc<Vec<Callee<'a>>>,
    next: usize,
    /// The callee being descended into, with the contexts left to try.
    current: Option<(usize, Step, Vec<usize>, usize)>,
    step: Option<Step>,
}

type Runs = Option<(String, String, String)>;

pub(super) struct Walk<'a> {
    /// The procedures a call may run: callable, with a text.
    procs: Vec<&'a Object>,
    /// Each one's name, normalized, as a text names it.
    names: Vec<String>,
    /// Synonyms for them: synonym, procedure, normalized name.
    synonyms: Vec<(&'a Object, usize, String)>,
    /// The contexts met, each once (by principal and key).
    lenders: Vec<Lender>,
    callees: HashMap<usize, Rc<Vec<Callee<'a>>>>,
    /// A procedure's own contexts, whether it switches context, and
    /// whether its text goes back to its caller's.
    own: HashMap<usize, (Vec<usize>, bool, bool)>,
    runs: HashMap<(Option<String>, usize, usize, usize), Runs>,
    reached: HashMap<(usize, Goal, Vec<usize>), Option<Made>>,
}

impl<'a> Walk<'a> {
    pub(super) fn new(ctx: &Context<'a>) -> Self {
        let procs: Vec<&'a Object> = ctx
            .catalog
            .objects
            .iter()
            .filter(|o| o.kind == ObjectKind::Procedure && callable(ctx, o) && body(o).is_some())
            .collect();
        let names: Vec<String> = procs.iter().map(|p| normalized(&p.qualified_name())).collect();
        let index: HashMap<&str, usize> = names.iter().enumerate().map(|(i, n)| (n.as_str(), i)).collect();
        let here = format!("{}.", normalized(&ctx.catalog.database));
        let synonyms = ctx
            .catalog
            .objects
            .iter()
            .filter(|s| s.kind == ObjectKind::Synonym && callable(ctx, s))
            .filter_map(|s| {
                let base = normalized(&code_only(s.definition.as_deref()?));
                let base = base.strip_prefix(&here).unwrap_or(&base);
                let p = *index.get(base)?;
                Some((s, p, normalized(&s.qualified_name())))
            })
            .collect();
        Walk {
            procs,
            names,
            synonyms,
            lenders: Vec::new(),
            callees: HashMap::new(),
            own: HashMap::new(),
            runs: HashMap::new(),
            reached: HashMap::new(),
        }
    }

    /// The calls from `m` (whose statements are `text`), run with
    /// `lender`, to the first procedure whose statements reach the goal,
    /// and what they make there.
    pub(super) fn path(
        &mut self,
        ctx: &Context<'a>,
        rights: &[Right],
        to: (Goal, &[Through]),
        m: &Object,
        text: &str,
        lender: &Lender,
    ) -> Option<(Vec<Step>, Made)> {
        let start = self.procs.iter().position(|p| std::ptr::eq(*p, m));
        let first = self.intern(lender);
        let mut visited: HashSet<(usize, usize)> = HashSet::new();
        let mut stack = vec![Frame {
            owner: chain_owner(ctx, m).map(str::to_string),
            lender: first,
            callees: Rc::new(self.callees_in(text)),
            next: 0,
            current: None,
            step: None,
        }];
        while let Some(f) = stack.last_mut() {
            if let Some((p, step, ctxs, j)) = &mut f.current {
                let Some(&c) = ctxs.get(*j) else {
                    f.current = None;
                    continue;
                };
                *j += 1;
                let (p, step) = (*p, step.clone());
                if visited.insert((p, c)) {
                    let callees = self.callees(p);
                    stack.push(Frame {
                        owner: chain_owner(ctx, self.procs[p]).map(str::to_string),
                        lender: c,
                        callees,
                        next: 0,
                        current: None,
                        step: Some(step),
                    });
                }
                continue;
            }
            let Some(&callee) = f.callees.get(f.next) else {
                stack.pop();
                continue;
            };
            f.next += 1;
            // The module itself is the walk's start: what it makes is its
            // own text's.
            if Some(callee.proc) == start {
                continue;
            }
            let (owner, l) = (f.owner.clone(), f.lender);
            let Some((call, evidence, cut)) = self.runs(ctx, rights, owner, callee, l) else {
                continue;
            };
            let (ctxs, keeps) = self.contexts(ctx, callee.proc, l);
            let step = Step {
                name: self.procs[callee.proc].qualified_name(),
                call,
                evidence,
                cut,
                key: self.lenders[l].key.clone(),
                keeps,
            };
            if let Some(made) = self.reached(ctx, rights, to, callee.proc, &ctxs) {
                let mut steps: Vec<Step> = stack.iter().filter_map(|f| f.step.clone()).collect();
                steps.push(step);
                return Some((steps, made));
            }
            if let Some(f) = stack.last_mut() {
                f.current = Some((callee.proc, step, ctxs, 0));
            }
        }
        None
    }

    fn intern(&mut self, l: &Lender) -> usize {
        if let Some(i) = self
            .lenders
            .iter()
            .position(|x| x.principal.eq_ignore_ascii_case(&l.principal) && x.key == l.key)
        {
            return i;
        }
        self.lenders.push(Lender {
            principal: l.principal.clone(),
            how: l.how.clone(),
            evidence: l.evidence.clone(),
            cut: l.cut.clone(),
            key: l.key.clone(),
        });
        self.lenders.len() - 1
    }

    /// The procedures `text` names, by themselves or by a synonym, in the
    /// catalog's order.
    fn callees_in(&self, text: &str) -> Vec<Callee<'a>> {
        let text = normalized(&code_only(text));
        let by_name = (0..self.procs.len())
            .filter(|&i| contains_words(&text, &self.names[i]))
            .map(|proc| Callee { proc, via: None });
        let by_synonym = self
            .synonyms
            .iter()
            .filter(|(_, _, n)| contains_words(&text, n))
            .map(|&(s, proc, _)| Callee { proc, via: Some(s) });
        by_name.chain(by_synonym).collect()
    }

    fn callees(&mut self, p: usize) -> Rc<Vec<Callee<'a>>> {
        if let Some(c) = self.callees.get(&p) {
            return c.clone();
        }
        let c = Rc::new(body(self.procs[p]).map(|b| self.callees_in(b)).unwrap_or_default());
        self.callees.insert(p, c.clone());
        c
    }

    /// Whether the EXEC of `callee` passes from a module owned by `owner`
    /// run with `l`: by a synonym, checked on the synonym (or chained to
    /// it) and then on the procedure unless the synonym's owner is its.
    fn runs(&mut self, ctx: &Context, rights: &[Right], owner: Option<String>, callee: Callee, l: usize) -> Runs {
        let via = callee.via.map_or(usize::MAX, |s| s as *const Object as usize);
        let key = (owner.map(|o| o.to_lowercase()), callee.proc, via, l);
        if let Some(r) = self.runs.get(&key) {
            return r.clone();
        }
        let p = self.procs[callee.proc];
        let lender = &self.lenders[l];
        let r = match callee.via {
            None => runs(ctx, rights, key.0.as_deref(), p, lender),
            Some(s) => runs(ctx, rights, key.0.as_deref(), s, lender).and_then(|(call, evidence, cut)| {
                let (then, base_evidence, base_cut) = runs(ctx, rights, ctx.catalog.owner_of(s), p, lender)?;
                let (syn, name) = (s.qualified_name(), p.qualified_name());
                Some((
                    format!("by the synonym {syn}, {call}; then {name} itself, {then}"),
                    format!("{evidence}; sys.synonyms: {syn} is for {name}; {base_evidence}"),
                    format!("{cut} (or {base_cut})"),
                ))
            }),
        };
        self.runs.insert(key, r.clone());
        r
    }

    /// The contexts `p`'s statements run with when called with `l`: its
    /// own EXECUTE AS or signatures, and `l` unless an EXECUTE AS of its
    /// own replaces it (a signature's rights carry only into a module
    /// countersigned with its key). Statements after an EXECUTE AS CALLER
    /// in `p` run with `l` again.
    fn contexts(&mut self, ctx: &Context, p: usize, l: usize) -> (Vec<usize>, bool) {
        if !self.own.contains_key(&p) {
            let o = self.procs[p];
            let own = lenders(ctx, o);
            let switches = own.iter().any(|x| x.key.is_none());
            let back = switches && body(o).is_some_and(has_caller_region);
            let ids = own.iter().map(|x| self.intern(x)).collect();
            self.own.insert(p, (ids, switches, back));
        }
        let (ids, switches, back) = &self.own[&p];
        let keeps = if *switches {
            *back
        } else {
            self.lenders[l].key.as_ref().is_none_or(|k| {
                self.procs[p]
                    .counter_signed_by
                    .iter()
                    .any(|c| c.eq_ignore_ascii_case(k))
            })
        };
        let mut out = Vec::new();
        if keeps {
            out.push(l);
        }
        out.extend(ids.iter().copied().filter(|i| !keeps || *i != l));
        (out, keeps && self.lenders[l].key.is_some() && !*switches)
    }

    /// What `p`'s own statements reach with `ctxs`, or by a chain from its
    /// owner.
    fn reached(
        &mut self,
        ctx: &Context,
        rights: &[Right],
        to: (Goal, &[Through]),
        p: usize,
        ctxs: &[usize],
    ) -> Option<Made> {
        let key = (p, to.0, ctxs.to_vec());
        if let Some(r) = self.reached.get(&key) {
            return r.clone();
        }
        let o = self.procs[p];
        let contexts: Vec<&Lender> = ctxs.iter().map(|&i| &self.lenders[i]).collect();
        let r = body(o).and_then(|b| own(ctx, rights, to, o, b, &contexts, chain_owner(ctx, o)));
        self.reached.insert(key, r.clone());
        r
    }
}
